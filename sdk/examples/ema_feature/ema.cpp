// ema — an exponential moving average of the weights, as a feature plugin.
//
// [features.ema]
//   decay = 0.999              each step: ema = decay·ema + (1 − decay)·weight
//   file  = "ema.safetensors"  written into the run directory
//   every = 0                  also every N optimizer steps (0: at the end only)
//
// The average lives on the device beside each weight, in a state value that
// starts as a copy of it (graph->state_add_copy: the initial weights, or the
// ones --init-from loaded) and is saved in every checkpoint, so a resumed
// run continues its average. Three catalog ops per weight, appended at the
// end of the optimizer phase, where every update has run:
//   delta = sub(weight, ema); step = scale(delta, 1 − decay); ema = add(ema, step)
// the last writing the state in place. A skipped step (amp's overflow)
// leaves the average alone with the weights.
//
// At the run's end (and every N steps) the averages are written under the
// weights' names, beside the layers' other states (running statistics), into
// one safetensors file that `tandem eval --weights` reads as it is
// (host->run_save_tensors writes it atomically, from the first rank only).
#include <tandem/graph_edit.hpp>
#include <tandem/tandem.hpp>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

using tandem::Error;

double number(const std::string& key, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(v))
    throw Error(TDM_INVALID_ARGUMENT, "[features.ema] " + key + " = \"" + text + "\" is not a number");
  return v;
}

class Ema final : public tandem::Feature {
 public:
  explicit Ema(const tandem::Config& config) {
    for (const auto& [key, value] : config.values())
      if (key != "decay" && key != "file" && key != "every" && key.rfind("tandem.", 0) != 0)
        throw Error(TDM_INVALID_ARGUMENT,
                    "[features.ema]: unknown key '" + key + "' (expected: decay, file, every)");
    decay_ = number("decay", config.get("decay").value_or("0.999"));
    if (!(decay_ >= 0 && decay_ < 1))
      throw Error(TDM_INVALID_ARGUMENT, "[features.ema] decay = " + std::to_string(decay_) +
                                            " is outside [0, 1): 0.999 averages over about 1000 steps");
    file_ = config.get("file").value_or("ema.safetensors");
    const double every = number("every", config.get("every").value_or("0"));
    if (every < 0 || every != std::floor(every))
      throw Error(TDM_INVALID_ARGUMENT, "[features.ema] every = " + std::to_string(every) +
                                            " is not a whole number of steps (0: at the end only)");
    every_ = static_cast<int64_t>(every);
  }

  void graph_pass(tdm_graph* graph) override {
    tandem::GraphEdit g(graph);
    const std::vector<tandem::NodeView> nodes = g.nodes();
    for (const tandem::ValueView& v : g.values()) {
      if (v.kind == TDM_VALUE_PARAMETER)
        average(g, v, layer_of(nodes, v.id));
      else if (v.kind == TDM_VALUE_STATE && read_in_forward(nodes, v.id))
        saved_.emplace_back(v.name, v.name);  // a layer's running statistics, as they are
    }
    if (saved_.empty()) throw Error(TDM_INVALID_ARGUMENT, "ema: the graph has no parameters to average");
  }

  void step_end(const tdm_step_info& info) override {
    if (every_ > 0 && (info.step + 1) % every_ == 0) save(info);
  }
  void run_end(const tdm_step_info& info) override { save(info); }

 private:
  // The layer of the first node reading `value`: the average's nodes run on
  // the device that holds the weight.
  static std::string layer_of(const std::vector<tandem::NodeView>& nodes, tdm_value_id value) {
    for (const tandem::NodeView& n : nodes)
      for (tdm_value_id in : n.inputs)
        if (in == value) return n.layer;
    return "";
  }
  static bool read_in_forward(const std::vector<tandem::NodeView>& nodes, tdm_value_id value) {
    for (const tandem::NodeView& n : nodes)
      if (n.phase == TDM_PHASE_FORWARD)
        for (tdm_value_id in : n.inputs)
          if (in == value) return true;
    return false;
  }

  void average(tandem::GraphEdit& g, const tandem::ValueView& weight, const std::string& layer) {
    if (layer.empty()) return;  // a weight no node reads needs no average
    const std::string ema_name = "ema." + weight.name;
    const tdm_value_id ema = g.add_state_copy(ema_name, weight.id);
    tandem::ValueView out = weight;  // same dtype and shape
    auto node = [&](const char* op, const std::string& name, std::vector<tdm_value_id> inputs,
                    std::vector<tandem::OwnedAttr> attrs) {
      tandem::GraphEdit::Spec s;
      s.op = op;
      s.name = name;
      s.layer = layer;
      s.phase = TDM_PHASE_OPTIMIZER;
      s.inputs = std::move(inputs);
      s.attrs = std::move(attrs);
      s.outputs = {out};
      return g.insert(s);  // appended: after every update of the step
    };
    const tdm_node_id delta = node("sub", ema_name + ".delta", {weight.id, ema}, {});
    tandem::OwnedAttr alpha, beta;
    alpha.name = "alpha", alpha.type = TDM_ATTR_FLOAT, alpha.f = 1.0 - decay_;
    beta.name = "beta", beta.type = TDM_ATTR_FLOAT, beta.f = 0.0;
    const tdm_node_id step = node("scale", ema_name + ".step", {g.output(delta, 0)}, {alpha, beta});
    const tdm_node_id add = node("add", ema_name + ".update", {ema, g.output(step, 0)}, {});
    g.annotate(add, "tandem.inplace", "0:0");  // the sum overwrites the average
    saved_.emplace_back(weight.name, ema_name);
  }

  void save(const tdm_step_info& info) const { tandem::Run(info).save(file_, saved_); }

  double decay_ = 0.999;
  std::string file_;
  int64_t every_ = 0;
  // {name in the file, run value}: each weight's average, and the layers'
  // other states as they are.
  std::vector<std::pair<std::string, std::string>> saved_;
};

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  return tandem::feature_entry<Ema>(
      host, major, minor,
      {"ema", "0.1.0", "Exponential moving average of the weights, written as a safetensors file.", {}},
      {TDM_PASS_AFTER_OPTIMIZER});
}
