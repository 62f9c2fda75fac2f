#include "place/stage_cut.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>

#include "exec/tensor_text.hpp"

namespace tandem::host::place {

std::string stage_device(const std::string& device, size_t stage) {
  return device + "/stage" + std::to_string(stage);
}

// The partition of the layers into `stages` runs whose largest sum is
// least: best[k][i] is that largest sum for the first i layers in k runs.
Result<std::vector<size_t>> cut_into_stages(const model::ModelSpec& spec,
                                            const std::map<std::string, double>& costs, size_t stages) {
  const size_t n = spec.layers.size();
  if (stages == 0 || n < stages)
    return make_error(spec.path + ": [train] pipeline_parallel = " + std::to_string(stages) +
                          " but the model has " + std::to_string(n) +
                          " layer(s): each stage holds at least one; use fewer stages",
                      TDM_INVALID_ARGUMENT);
  std::vector<double> prefix(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) {
    auto c = costs.find(spec.layers[i].name);
    prefix[i + 1] = prefix[i] + (c != costs.end() ? c->second : 1.0);
  }
  constexpr double kNone = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kNone));
  std::vector<std::vector<size_t>> start(stages + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t k = 1; k <= stages; ++k)
    for (size_t i = k; i <= n; ++i)
      for (size_t j = k - 1; j < i; ++j) {  // the last run is layers [j, i)
        const double worst = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (worst < best[k][i]) {
          best[k][i] = worst;
          start[k][i] = j;
        }
      }
  std::vector<size_t> stage_of(n, 0);
  for (size_t k = stages, i = n; k > 0; --k) {
    const size_t j = start[k][i];
    for (size_t l = j; l < i; ++l) stage_of[l] = k - 1;
    i = j;
  }
  return stage_of;
}

Result<std::vector<size_t>> cut_at(const model::ModelSpec& spec, const std::vector<std::string>& firsts,
                                   size_t stages) {
  const std::string key = spec.path + ": [train] pipeline_cut";
  if (firsts.size() + 1 != stages)
    return make_error(key + " names " + std::to_string(firsts.size()) +
                          " layer(s) but pipeline_parallel = " + std::to_string(stages) + " needs " +
                          std::to_string(stages - 1) + ": the first layer of each stage after the first",
                      TDM_INVALID_ARGUMENT);
  const size_t n = spec.layers.size();
  std::vector<size_t> stage_of(n, 0);
  size_t begin = 0;  // where the stage before the next cut begins
  for (size_t k = 0; k < firsts.size(); ++k) {
    const std::string& name = firsts[k];
    size_t at = 0;
    while (at < n && spec.layers[at].name != name && spec.layers[at].name.rfind(name + ".", 0) != 0) ++at;
    if (at == n)
      return make_error(key + ": '" + name + "' names no layer of the model (`tandem plan` lists them)",
                        TDM_INVALID_ARGUMENT);
    if (at <= begin)
      return make_error(key + ": '" + name + "' begins stage " + std::to_string(k + 1) +
                            (at == 0 ? " at the model's first layer" : " where an earlier stage begins") +
                            ": name the stages' first layers in the model's order, each after the last",
                        TDM_INVALID_ARGUMENT);
    for (size_t l = at; l < n; ++l) stage_of[l] = k + 1;
    begin = at;
  }
  return stage_of;
}

namespace {

Error cannot(const std::string& why) {
  return make_error("pipeline_parallel: " + why, TDM_UNSUPPORTED);
}

// What the planner works on, per stage.
struct StageGraph {
  const DeviceGraph* graph = nullptr;
  size_t optimizer_begin = 0;  // local
  std::set<size_t> cuts;
};

class Planner {
 public:
  Planner(const SplitGraph& split, const std::map<ValueId, std::string>& home,
          const StagePipelineRequest& request)
      : split_(split), home_(home), request_(request) {}

  Result<exec::RankPipelineLayout> run() {
    if (auto r = find_stages(); !r) return r.error();
    for (const Transfer& t : split_.transfers)
      if (auto r = add_message(t); !r) return r.error();
    cut_segments();
    if (auto r = order(); !r) return r.error();
    add_feeds_and_homes();
    return std::move(out_);
  }

 private:
  Result<void> find_stages() {
    for (const std::string& id : request_.stage_devices) {
      auto it = std::find_if(split_.devices.begin(), split_.devices.end(),
                             [&](const DeviceGraph& d) { return d.device == id; });
      if (it == split_.devices.end()) return cannot(id + " holds no node: a stage without layers (internal)");
      index_[id] = stages_.size();
      StageGraph s;
      s.graph = &*it;
      s.optimizer_begin =
          size_t(std::lower_bound(it->positions.begin(), it->positions.end(), request_.optimizer_begin) -
                 it->positions.begin());
      if (s.optimizer_begin == 0) return cannot(id + " runs no forward or backward node (internal)");
      s.cuts = {0, s.optimizer_begin};
      stages_.push_back(std::move(s));
      out_.positions.push_back(it->positions);
    }
    out_.micro_batches = request_.micro_batches;
    return {};
  }

  // SIZE_MAX when nothing reads it.
  size_t first_reader(const Graph& g, ValueId v) const {
    for (size_t i = 0; i < g.node_count(); ++i) {
      const auto& in = g.node_at(i)->inputs;
      if (std::find(in.begin(), in.end(), v) != in.end()) return i;
    }
    return SIZE_MAX;
  }

  Result<void> add_message(const Transfer& t) {
    const auto from = index_.find(t.from), to = index_.find(t.to);
    if (from == index_.end() || to == index_.end())
      return cannot("'" + t.value + "' is copied between " + t.from + " and " + t.to +
                    ", which are not both stages (internal)");
    const bool fed = std::find(request_.per_micro_batch.begin(), request_.per_micro_batch.end(), t.value) !=
                     request_.per_micro_batch.end();
    if (fed) return {};  // every stage writes its own copy of the batch
    const Graph& a = stages_[from->second].graph->graph;
    const Graph& b = stages_[to->second].graph->graph;
    const Value* source = a.value_by_name(t.value);
    const Value* destination = b.value_by_name(t.value + "@" + t.to);
    if (destination == nullptr) return {};  // copied, never read
    if (source == nullptr)
      return cannot("'" + t.value + "' is sent from " + t.from + ", which does not hold it (internal)");
    exec::StageMessage m;
    m.position = t.position;
    m.from = int(from->second);
    m.to = int(to->second);
    m.name = t.value;
    m.bytes = exec::tensor_bytes(source->type);
    m.source = source->id;
    m.destination = destination->id;
    constexpr size_t kNever = SIZE_MAX;
    const size_t made = source->producer != kNoNode ? a.position(source->producer).value_or(kNever) : kNever;
    const size_t read = first_reader(b, destination->id);
    if (t.position >= request_.optimizer_begin) {
      m.when = exec::StageMessage::When::InOrder;
    } else if (made >= stages_[from->second].optimizer_begin) {  // nothing in forward or backward made it
      m.when = exec::StageMessage::When::BeforeStep;
    } else if (read >= stages_[to->second].optimizer_begin) {
      if (source->kind == TDM_VALUE_ACTIVATION)
        return cannot("the optimizer on stage " + std::to_string(m.to) + " reads '" + t.value +
                      "', which each micro-batch computes on stage " + std::to_string(m.from));
      m.when = exec::StageMessage::When::AfterStep;
    } else {
      if (source->kind != TDM_VALUE_ACTIVATION)
        return cannot("'" + t.value + "', state carried from one micro-batch to the next on stage " +
                      std::to_string(m.from) + ", is read by stage " + std::to_string(m.to));
      m.when = exec::StageMessage::When::MicroBatch;
      m.made = made;  // local nodes until cut_segments turns them into segments
      m.read = read;
      stages_[from->second].cuts.insert(made + 1);
      stages_[to->second].cuts.insert(read);
    }
    out_.messages.push_back(std::move(m));
    return {};
  }

  // Segments end where a message is received or sent, and where forward
  // turns into backward.
  void cut_segments() {
    for (StageGraph& s : stages_) {
      const Graph& g = s.graph->graph;
      for (size_t i = 1; i < s.optimizer_begin; ++i)
        if (g.node_at(i)->phase != g.node_at(i - 1)->phase) s.cuts.insert(i);
      std::vector<size_t> bounds(s.cuts.begin(), s.cuts.end());
      bounds.erase(std::upper_bound(bounds.begin(), bounds.end(), s.optimizer_begin), bounds.end());
      out_.bounds.push_back(std::move(bounds));
    }
    const auto segment_of = [&](size_t stage, size_t local) {
      const std::vector<size_t>& b = out_.bounds[stage];
      return size_t(std::upper_bound(b.begin(), b.end(), local) - b.begin()) - 1;
    };
    out_.shape.stages.resize(stages_.size());
    for (size_t k = 0; k < stages_.size(); ++k) {
      const std::vector<size_t>& b = out_.bounds[k];
      for (size_t g = 0; g + 1 < b.size(); ++g) {
        const bool backward = stages_[k].graph->graph.node_at(b[g])->phase == TDM_PHASE_BACKWARD;
        out_.shape.stages[k].push_back(exec::PipelineSegment{backward, double(b[g + 1] - b[g]), {}, {}});
      }
    }
    for (exec::StageMessage& m : out_.messages) {
      if (m.when != exec::StageMessage::When::MicroBatch) continue;
      m.made = segment_of(size_t(m.from), m.made);
      m.read = segment_of(size_t(m.to), m.read);
      auto& after = out_.shape.stages[size_t(m.to)][m.read].after;
      const exec::SegmentRef producer{size_t(m.from), m.made};
      if (std::find(after.begin(), after.end(), producer) == after.end()) after.push_back(producer);
    }
  }

  Result<void> order() {
    out_.order = request_.pipelined ? exec::one_forward_one_backward(out_.shape, request_.micro_batches)
                                    : exec::one_after_another(out_.shape, request_.micro_batches);
    std::string why;
    if (!exec::simulate(out_.shape, out_.order, &why))
      return cannot("the stages depend on each other in a way this order cannot serve (" + why + ")");
    return {};
  }

  void add_feeds_and_homes() {
    out_.feeds.resize(stages_.size());
    for (size_t k = 0; k < stages_.size(); ++k) {
      const DeviceGraph& d = *stages_[k].graph;
      for (size_t i = 0; i < request_.per_micro_batch.size(); ++i)
        for (const std::string& name :
             {request_.per_micro_batch[i], request_.per_micro_batch[i] + "@" + d.device})
          if (const Value* v = d.graph.value_by_name(name)) out_.feeds[k].emplace_back(v->id, i);
    }
    for (const auto& [value, device] : home_) {
      auto stage = index_.find(device);
      if (stage == index_.end()) continue;
      const DeviceGraph& d = *stages_[stage->second].graph;
      if (auto local = d.local_of.find(value); local != d.local_of.end())
        out_.home[value] = {int(stage->second), local->second};
    }
  }

  const SplitGraph& split_;
  const std::map<ValueId, std::string>& home_;
  const StagePipelineRequest& request_;
  std::map<std::string, size_t> index_;
  std::vector<StageGraph> stages_;
  exec::RankPipelineLayout out_;
};

}  // namespace

Result<exec::RankPipelineLayout> plan_stage_pipeline(const SplitGraph& split,
                                                     const std::map<ValueId, std::string>& home,
                                                     const StagePipelineRequest& request) {
  return Planner(split, home, request).run();
}

}  // namespace tandem::host::place
