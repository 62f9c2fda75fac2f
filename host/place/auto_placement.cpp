#include "place/auto_placement.hpp"

#include <algorithm>
#include <limits>
#include <optional>

namespace tandem::host::place {
namespace {

class Search {
 public:
  Search(const Graph& g, const model::ModelSpec& spec, const AutoPlacementInputs& in)
      : g_(g), spec_(spec), in_(in) {}

  Result<AutoPlacement> run() {
    if (in_.estimate.costs == nullptr)
      return make_error("automatic placement needs a cost model (internal)", TDM_INTERNAL);
    if (auto r = start(); !r) return r.error();
    auto current = evaluate(assignment_);
    if (!current) return current.error();
    PlanEstimate cur = *current;
    // A pipeline's step is its slowest stage's: a balanced cut in two is
    // where its search starts (single moves from one device rarely get there).
    if (cur.over() > 0 || (in_.estimate.pipelined && in_.candidates.size() > 1)) start_from_best_split(cur);
    // Enough rounds to move every layer a few times; each round makes one move.
    const size_t rounds = 4 * (layers_.size() + 1) * in_.candidates.size();
    for (size_t round = 0; round < rounds; ++round) {
      std::optional<std::pair<std::string, std::string>> best;
      PlanEstimate best_estimate;
      double best_score = std::numeric_limits<double>::infinity();
      for (const std::string& layer : layers_) {
        for (const std::string& device : allowed_[layer]) {
          if (device == assignment_[layer]) continue;
          auto moved = assignment_;
          moved[layer] = device;
          if (in_.estimate.pipelined && !contiguous(moved)) continue;
          auto e = evaluate(moved);
          if (!e) continue;  // e.g. strict placement refuses the copies it would need
          double score = 0;
          if (cur.over() > 0) {
            if (e->over() >= cur.over()) continue;
            score = (step(*e) - step(cur)) / static_cast<double>(cur.over() - e->over());
          } else {
            if (e->over() > 0 || step(*e) >= step(cur) * (1 - 1e-3)) continue;
            score = step(*e) - step(cur);
          }
          if (score < best_score) {
            best_score = score;
            best = {layer, device};
            best_estimate = *e;
          }
        }
      }
      if (!best) break;
      assignment_[best->first] = best->second;
      cur = best_estimate;
    }
    AutoPlacement out;
    out.layer_devices = assignment_;
    out.estimate = cur;
    out.fits = cur.over() == 0;
    out.evaluated = memo_.size();
    return out;
  }

 private:
  // The step time an assignment is judged by: as it will run (pipelined
  // over its stages when the micro-batches are).
  double step(const PlanEstimate& e) const {
    return in_.estimate.pipelined ? e.step_us_as_run() : e.step_us();
  }

  // Pipeline stages are runs of consecutive layers (model order, pinned
  // ones included): a layer between two of another device's would make its
  // micro-batch cross back and forth, each stage waiting for the other.
  bool contiguous(const std::map<std::string, std::string>& assignment) const {
    std::vector<std::string> seen;
    for (const model::LayerSpec& layer : spec_.layers) {
      auto a = assignment.find(layer.name);
      const std::string& device = a != assignment.end() ? a->second : pinned_device(layer);
      if (!seen.empty() && seen.back() == device) continue;
      if (std::find(seen.begin(), seen.end(), device) != seen.end()) return false;
      seen.push_back(device);
    }
    return true;
  }
  std::string pinned_device(const model::LayerSpec& layer) const {
    if (!layer.device) return in_.placement.default_device;
    auto id =
        in_.placement.resolve ? in_.placement.resolve(*layer.device) : Result<std::string>(*layer.device);
    return id ? *id : *layer.device;
  }

  // Every unpinned layer on the device where its ops take least time.
  Result<void> start() {
    std::map<std::string, std::map<std::string, double>> time;  // layer -> device -> us
    std::map<std::string, std::string> unsupported;             // layer -> why, on some device
    for (const model::LayerSpec& layer : spec_.layers)
      if (!layer.device) layers_.push_back(layer.name);
    for (size_t i = 0; i < g_.node_count(); ++i) {
      const Node& n = *g_.node_at(i);
      auto spec = exec::op_spec_of(g_, n);
      if (!spec) return spec.error();
      for (const std::string& device : in_.candidates) {
        auto cost = in_.estimate.costs->op(device, *spec);
        if (!cost) return cost.error();
        if (!cost->supported) {
          time[n.layer][device] = std::numeric_limits<double>::infinity();
          unsupported[n.layer + "@" + device] = cost->why;
        } else if (time[n.layer][device] != std::numeric_limits<double>::infinity()) {
          time[n.layer][device] += cost->micros;
        }
      }
    }
    for (const std::string& layer : layers_) {
      std::string fastest;
      for (const std::string& device : in_.candidates) {
        const double t = time[layer][device];
        if (t == std::numeric_limits<double>::infinity()) continue;
        allowed_[layer].push_back(device);
        if (fastest.empty() || t < time[layer][fastest]) fastest = device;
      }
      if (fastest.empty()) {
        std::string why;
        for (const std::string& device : in_.candidates)
          why += (why.empty() ? "" : "; ") + device + ": " + unsupported[layer + "@" + device];
        return make_error(
            spec_.path + ": layer '" + layer + "' can run on none of the devices of this run (" + why + ")",
            TDM_UNSUPPORTED);
      }
      assignment_[layer] = fastest;
    }
    return {};
  }

  // When the fastest assignment is over a budget, single-layer moves from it
  // can stall before anything fits: each move out of a full device adds
  // copy buffers on both sides, so it may free fewer bytes than it costs.
  // A chain of layers fits most easily cut in two: the layers before a cut
  // on one device, the rest on another. Every such cut is evaluated; the
  // fastest that fits (or, if none does, the one least over) becomes the
  // start of the greedy search when it is better than the fastest start.
  void start_from_best_split(PlanEstimate& cur) {
    const auto better = [this](const PlanEstimate& a, const PlanEstimate& b) {
      return a.over() != b.over() ? a.over() < b.over() : step(a) < step(b);
    };
    std::optional<std::map<std::string, std::string>> best;
    // A pipeline's stages are consecutive layers: a start that is not
    // gives way to the first cut that is, whatever its time.
    bool must_cut = in_.estimate.pipelined && !contiguous(assignment_);
    for (const std::string& first : in_.candidates)
      for (const std::string& rest : in_.candidates) {
        if (first == rest) continue;
        for (size_t cut = 0; cut <= layers_.size(); ++cut) {
          auto split = assignment_;
          for (size_t i = 0; i < layers_.size(); ++i) {
            const std::string& device = i < cut ? first : rest;
            const auto& allowed = allowed_[layers_[i]];
            if (std::find(allowed.begin(), allowed.end(), device) != allowed.end())
              split[layers_[i]] = device;
          }
          auto e = evaluate(split);
          if (!e) continue;
          if (must_cut || better(*e, cur)) {
            must_cut = false;
            cur = *e;
            best = std::move(split);
          }
        }
      }
    if (best) assignment_ = std::move(*best);
  }

  Result<PlanEstimate> evaluate(const std::map<std::string, std::string>& assignment) {
    std::string key;
    for (const auto& [layer, device] : assignment) key += layer + "=" + device + ";";
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    Graph copy = g_;
    PlacementOptions o = in_.placement;
    o.layer_devices = assignment;
    auto placement = place_layers(copy, spec_, o);
    if (!placement) return placement.error();
    auto e = estimate_plan(copy, &*placement, in_.estimate);
    if (!e) return e.error();
    return memo_[key] = std::move(*e);
  }

  const Graph& g_;
  const model::ModelSpec& spec_;
  const AutoPlacementInputs& in_;
  std::vector<std::string> layers_;                          // unpinned, model order
  std::map<std::string, std::vector<std::string>> allowed_;  // layer -> devices that run all its ops
  std::map<std::string, std::string> assignment_;
  std::map<std::string, PlanEstimate> memo_;
};

}  // namespace

Result<AutoPlacement> place_automatically(const Graph& graph, const model::ModelSpec& spec,
                                          const AutoPlacementInputs& in) {
  return Search(graph, spec, in).run();
}

}  // namespace tandem::host::place
