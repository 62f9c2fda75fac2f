// grad_accum — gradient accumulation as a feature plugin.
//
// [features.grad_accum] steps = k: one optimizer step per k micro-batches
// (each of the model file's batch_size), so a batch of k·batch_size samples
// trains with the activation memory of one micro-batch. Or micro_batch = m:
// each batch of batch_size samples is split into batch_size/m micro-batches
// of m (ABI 1.3: the host builds the graph for m samples).
//
// The graph pass (after the optimizer is appended) rewrites every parameter
// gradient g into an accumulator: a state "grad_accum.<gradient>" A, a node
// add(A, g) right after g's producer that writes A in place, and every former
// reader of g (clipping, the optimizer) reading the sum instead; a fill(A)
// of 0 in place at the very end of the optimizer phase clears A for the
// next step. The
// loss gradient seed becomes 1/k, so the sum is the mean over the k
// micro-batches, as one batch of k·batch_size would give. The host learns k
// from micro_batches() (ABI 1.2) and runs forward and backward k times per
// optimizer step.
#include <tandem/tandem.hpp>

#include <string>
#include <vector>

namespace {

using tandem::Error;

const tdm_graph_api& graph_api() {
  return *tandem::Host::api()->graph;
}

void check(tdm_status status, const std::string& what) {
  if (status != TDM_OK) throw Error(status, "grad_accum: " + what + " failed");
}

tdm_attr float_attr(const char* name, double value) {
  tdm_attr a{};
  a.struct_size = sizeof a;
  a.name = name;
  a.type = TDM_ATTR_FLOAT;
  a.f = value;
  return a;
}

class GradAccum final : public tandem::Feature {
 public:
  explicit GradAccum(const tandem::Config& config) {
    for (const auto& [key, value] : config.values())
      if (key != "steps" && key != "micro_batch" && key.rfind("tandem.", 0) != 0)
        throw Error(TDM_INVALID_ARGUMENT,
                    "[features.grad_accum]: unknown key '" + key + "' (expected: steps or micro_batch)");
    const auto steps = config.get("steps"), micro = config.get("micro_batch");
    if (steps && micro)
      throw Error(
          TDM_INVALID_ARGUMENT,
          "[features.grad_accum]: give steps (micro-batches of batch_size each) or micro_batch (split "
          "batch_size into micro-batches of this size), not both");
    if (!micro) {
      steps_ = whole_number("steps", steps.value_or(""));
      return;
    }
    const uint32_t batch = whole_number("tandem.batch_size", config.get("tandem.batch_size").value_or(""));
    micro_batch_ = whole_number("micro_batch", *micro);
    if (batch % micro_batch_ != 0)
      throw Error(TDM_INVALID_ARGUMENT,
                  "[features.grad_accum] micro_batch = " + std::to_string(micro_batch_) +
                      " does not divide [train] batch_size = " + std::to_string(batch) +
                      "; choose a divisor of the batch size");
    steps_ = batch / micro_batch_;
  }

  uint32_t micro_batches() override { return steps_; }
  uint32_t micro_batch_size() override { return micro_batch_; }

  void graph_pass(tdm_graph* graph) override {
    if (steps_ == 1) return;
    const tdm_graph_api& g = graph_api();
    scale_loss_seed(graph);
    std::vector<tdm_value_id> gradients;
    for (size_t i = 0; i < g.value_count(graph); ++i) {
      tdm_value_info v{};
      v.struct_size = sizeof v;
      check(g.value_at(graph, i, &v), "value_at");
      if (v.kind == TDM_VALUE_GRADIENT) gradients.push_back(v.id);
    }
    if (gradients.empty())
      throw Error(TDM_INVALID_ARGUMENT, "grad_accum: the graph has no parameter gradients");
    for (tdm_value_id grad : gradients) accumulate(graph, grad);
  }

 private:
  // The backward pass starts from d(loss)/d(loss) = 1/k instead of 1.
  void scale_loss_seed(tdm_graph* graph) {
    const tdm_graph_api& g = graph_api();
    for (size_t i = 0; i < g.node_count(graph); ++i) {
      tdm_node_info n{};
      n.struct_size = sizeof n;
      check(g.node_at(graph, i, &n), "node_at");
      if (std::string(n.name) != "loss.grad_seed") continue;
      const tdm_attr value = float_attr("value", 1.0 / steps_);
      check(g.node_set_attr(graph, n.id, &value), "setting the loss seed");
      return;
    }
    throw Error(TDM_INVALID_ARGUMENT, "grad_accum: no 'loss.grad_seed' node: is this a training graph?");
  }

  void accumulate(tdm_graph* graph, tdm_value_id grad) {
    const tdm_graph_api& g = graph_api();
    tdm_value_info v{};
    v.struct_size = sizeof v;
    check(g.value_get(graph, grad, &v), "value_get");
    const std::string name = v.name;
    // Copies: the strings and dims live only until the next modification.
    std::vector<int64_t> dims(v.desc.dims, v.desc.dims + v.desc.rank);
    tdm_tensor_desc desc = v.desc;
    desc.dims = dims.data();
    const tdm_node_id producer = v.producer;

    tdm_value_id acc = TDM_NO_VALUE;
    check(g.state_add(graph, ("grad_accum." + name).c_str(), &desc, 0.0, &acc),
          "adding the accumulator of " + name);

    // add(A, g) right after g's producer, writing A in place, in the
    // producer's layer (it runs where that layer runs; the node after it
    // may be another layer's, on another device).
    tdm_node_id anchor = -1;
    std::string layer;
    for (size_t i = 0; i + 1 < g.node_count(graph); ++i) {
      tdm_node_info n{};
      n.struct_size = sizeof n;
      check(g.node_at(graph, i, &n), "node_at");
      if (n.id != producer) continue;
      layer = n.layer != nullptr ? n.layer : "";
      tdm_node_info next{};
      next.struct_size = sizeof next;
      check(g.node_at(graph, i + 1, &next), "node_at");
      anchor = next.id;
      break;
    }
    const std::string add_name = "grad_accum.add." + name;
    const tdm_value_id add_inputs[] = {acc, grad};
    tdm_node_spec add{};
    add.struct_size = sizeof add;
    add.op = "add";
    add.name = add_name.c_str();
    add.layer = layer.empty() ? nullptr : layer.c_str();
    add.phase = TDM_PHASE_BACKWARD;
    add.inputs = add_inputs;
    add.n_inputs = 2;
    add.outputs = &desc;
    add.n_outputs = 1;
    add.anchor = anchor;
    tdm_node_id add_id = -1;
    check(g.node_insert(graph, &add, &add_id), "inserting " + add_name);
    check(g.node_annotate(graph, add_id, "tandem.inplace", "0:0"), "annotating " + add_name);
    tdm_value_id sum = TDM_NO_VALUE;
    check(g.node_output(graph, add_id, 0, &sum), "node_output");
    check(g.value_replace_uses(graph, grad, sum, add_id), "redirecting the readers of " + name);

    // Clear the accumulator once the optimizer has used it: a fill that
    // overwrites it, not a scale by 0, which would keep an overflow's inf
    // (a step mixed precision skips) as NaN in every later step.
    const std::string clear_name = "grad_accum.clear." + name;
    const tdm_attr zero = float_attr("value", 0.0);
    tdm_node_spec clear{};
    clear.struct_size = sizeof clear;
    clear.op = "fill";
    clear.name = clear_name.c_str();
    clear.phase = TDM_PHASE_OPTIMIZER;
    clear.attrs = &zero;
    clear.n_attrs = 1;
    clear.inputs = &sum;
    clear.n_inputs = 1;
    clear.outputs = &desc;
    clear.n_outputs = 1;
    clear.anchor = -1;
    tdm_node_id clear_id = -1;
    check(g.node_insert(graph, &clear, &clear_id), "inserting " + clear_name);
    check(g.node_annotate(graph, clear_id, "tandem.inplace", "0:0"), "annotating " + clear_name);
    // A skipped step (e.g. an overflow) must still start the next one from zero.
    check(g.node_annotate(graph, clear_id, "tandem.run_on_skip", "1"), "annotating " + clear_name);
  }

  static uint32_t whole_number(const std::string& key, const std::string& text) {
    size_t used = 0;
    long k = 0;
    try {
      k = std::stol(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size() || k < 1 || k > 1 << 20)
      throw Error(TDM_INVALID_ARGUMENT,
                  "[features.grad_accum] " + key + " must be a whole number >= 1, got '" + text + "'");
    return static_cast<uint32_t>(k);
  }

  uint32_t steps_ = 1;
  uint32_t micro_batch_ = 0;  // 0: micro-batches of the model's batch_size
};

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  try {
    tandem::FeatureTraits traits;
    traits.stage = TDM_PASS_AFTER_OPTIMIZER;
    return tandem::feature_entry<GradAccum>(
        host, major, minor,
        {"grad_accum", "0.1.0", "Gradient accumulation: one optimizer step per k micro-batches", {}}, traits);
  } catch (...) {  // the descriptor's strings allocate; nothing may escape a C entry point
    return nullptr;
  }
}
