// quantize — quantization-aware training (QAT) as a feature plugin.
//
// [features.quantize] mode = "qat": every forward `linear` and `conv2d`
// reads its input and its weight through `fake_quant` (sdk/ops.md), so the
// model trains with the rounding INT8 inference will apply, and learns to
// live with it:
//   input  -> fake_quant u8 grid (0..255, zero point), per tensor;
//   weight -> fake_quant symmetric s8 grid (-127..127), per tensor or per
//             output channel (per_channel = true), as `tandem quantize`
//             quantizes weights.
// The grids come from each tensor's own range at every step (fake_quant
// without a `scale` attribute): weights change every step, and min-max of
// the current values is exactly how `tandem quantize` will set their scales.
// Post-training quantization of the trained f32 weights is then done by
// `tandem quantize` as for any model.
//
// Pass stage: before autodiff. Unlike amp, which rewrites forward and
// backward itself after autodiff (it must place loss scaling on the
// backward graph), QAT only changes what the forward computes; running
// first lets the host's autodiff differentiate through fake_quant with the
// catalog's rule (fake_quant_grad, the straight-through estimator), so the
// weight gradients flow to the f32 master weights with no backward edits
// here. Uses only the feature ABI (tdm_graph_api).
#include <tandem/graph_edit.hpp>
#include <tandem/tandem.hpp>

#include <set>
#include <string>
#include <vector>

namespace {

using tandem::Error;
using tandem::Host;

struct Options {
  bool per_channel = false;
  bool activations = true;
  bool weights = true;
};

bool boolean(const tandem::Config& config, const std::string& key, bool fallback) {
  const auto v = config.get(key);
  if (!v) return fallback;
  if (*v == "true" || *v == "1") return true;
  if (*v == "false" || *v == "0") return false;
  throw Error(TDM_INVALID_ARGUMENT, "[features.quantize] " + key + " = '" + *v + "': expected true or false");
}

Options parse(const tandem::Config& config) {
  static const std::set<std::string> known = {"mode", "per_channel", "activations", "weights"};
  for (const auto& [key, value] : config.values())
    if (known.count(key) == 0 && key.rfind("tandem.", 0) != 0)  // "tandem.": facts from the host (ABI 1.3)
      throw Error(TDM_INVALID_ARGUMENT, "[features.quantize]: unknown key '" + key +
                                            "' (expected: mode, per_channel, activations, weights)");
  const std::string mode = config.get("mode").value_or("");
  if (mode != "qat")
    throw Error(TDM_INVALID_ARGUMENT,
                "[features.quantize] mode = '" + mode +
                    "': expected \"qat\" (quantization-aware training); post-training quantization of a "
                    "trained model is `tandem quantize MODEL.toml --weights CKPT --output DIR`");
  Options o;
  o.per_channel = boolean(config, "per_channel", false);
  o.activations = boolean(config, "activations", true);
  o.weights = boolean(config, "weights", true);
  if (!o.activations && !o.weights)
    throw Error(TDM_INVALID_ARGUMENT,
                "[features.quantize] activations and weights are both false: nothing to do");
  return o;
}

void check(tdm_status s, const std::string& what) {
  if (s != TDM_OK) throw Error(s, "quantize: " + what + " failed (see the host's message above)");
}

class Quantize final : public tandem::Feature {
 public:
  explicit Quantize(const tandem::Config& config) : options_(parse(config)) {}

  void graph_pass(tdm_graph* graph) override {
    const tdm_graph_api& g = *Host::api()->graph;
    // Ids first: inserting nodes shifts schedule positions. The targets are
    // the forward products the catalog calls quantizable (linear, conv2d).
    const tandem::GraphEdit edit(graph);
    std::vector<tdm_node_id> targets;
    for (const tandem::NodeView& n : edit.nodes())
      if (n.phase == TDM_PHASE_FORWARD && edit.op_kind(n.id).is(TDM_OP_QUANTIZABLE)) targets.push_back(n.id);
    int inserted = 0;
    for (tdm_node_id id : targets) {
      tdm_node_info n{};
      n.struct_size = sizeof n;
      check(g.node_get(graph, id, &n), "node_get");
      const std::string name = n.name;
      if (options_.activations) {
        // u8 activations with a zero point: the grid of linear_int8's input.
        insert(graph, id, 0, name + ".fake_quant_input", 0, 255, false);
        ++inserted;
      }
      if (options_.weights) {
        // Symmetric s8 weights, per output channel (axis 0) or per tensor.
        insert(graph, id, 1, name + ".fake_quant_weight", -127, 127, options_.per_channel);
        ++inserted;
      }
    }
    if (targets.empty())
      Host::log(TDM_LOG_WARNING,
                "quantize: the model has no linear or conv2d layer; nothing to fake-quantize");
    else
      Host::log(TDM_LOG_INFO, "quantize: QAT, " + std::to_string(inserted) + " fake_quant nodes on " +
                                  std::to_string(targets.size()) + " layers (weights " +
                                  (options_.per_channel ? "per channel" : "per tensor") + ")");
  }

 private:
  // fake_quant(input `slot` of `node`) inserted right before it.
  void insert(tdm_graph* graph, tdm_node_id node, size_t slot, const std::string& name, int64_t qmin,
              int64_t qmax, bool per_channel) {
    const tdm_graph_api& g = *Host::api()->graph;
    tdm_value_id x = TDM_NO_VALUE;
    check(g.node_input(graph, node, slot, &x), "node_input");
    tdm_value_info v{};
    v.struct_size = sizeof v;
    check(g.value_get(graph, x, &v), "value_get");
    if (v.desc.dtype != TDM_F32)
      throw Error(TDM_UNSUPPORTED, "quantize: '" + name + "' would fake-quantize a non-f32 tensor '" +
                                       std::string(v.name) + "' (QAT needs an f32 model)");
    const std::vector<int64_t> dims(v.desc.dims, v.desc.dims + v.desc.rank);
    std::vector<tdm_attr> attrs;
    auto add_int = [&](const char* key, int64_t value) {
      tdm_attr a{};
      a.struct_size = sizeof a;
      a.name = key;
      a.type = TDM_ATTR_INT;
      a.i = value;
      attrs.push_back(a);
    };
    add_int("quant_min", qmin);
    add_int("quant_max", qmax);
    add_int("per_channel", per_channel ? 1 : 0);
    add_int("axis", 0);
    tdm_tensor_desc out{};
    out.struct_size = sizeof out;
    out.dtype = TDM_F32;
    out.rank = static_cast<uint32_t>(dims.size());
    out.dims = dims.data();
    tdm_node_spec s{};
    s.struct_size = sizeof s;
    s.op = "fake_quant";
    s.name = name.c_str();
    s.layer = nullptr;  // the layer of the anchor
    s.phase = TDM_PHASE_FORWARD;
    s.attrs = attrs.data();
    s.n_attrs = attrs.size();
    s.inputs = &x;
    s.n_inputs = 1;
    s.outputs = &out;
    s.n_outputs = 1;
    s.anchor = node;
    tdm_node_id fq = -1;
    check(g.node_insert(graph, &s, &fq), "inserting '" + name + "'");
    tdm_value_id y = TDM_NO_VALUE;
    check(g.node_output(graph, fq, 0, &y), "node_output");
    check(g.node_set_input(graph, node, slot, y), "node_set_input");
  }

  Options options_;
};

// fake_quant is an f32 op in the catalog; amp would cast around it, which is
// untested and would train a different rounding than INT8 inference.
const char* const kConflicts[] = {"amp", nullptr};

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  try {
    tandem::FeatureTraits traits;
    traits.stage = TDM_PASS_BEFORE_AUTODIFF;
    traits.conflicts_with = kConflicts;
    return tandem::feature_entry<Quantize>(
        host, major, minor,
        {"quantize",
         "0.1.0",
         "INT8 quantization-aware training: fake_quant on linear/conv inputs and weights",
         {}},
        traits);
  } catch (...) {  // the descriptor's strings allocate; nothing may escape a C entry point
    return nullptr;
  }
}
