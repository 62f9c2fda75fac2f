// Internal to the graph builder: the per-layer expansion into catalog ops.
#pragma once

#include <string>
#include <vector>

#include "lowering/int8_plan.hpp"
#include "lowering/model_graph.hpp"
#include "ops/shapes.hpp"

namespace tandem::host::lowering::detail {

// Builder state shared by the layer expansions.
struct Context {
  ModelGraph& out;
  const model::ModelSpec& spec;
  const model::LayerSpec* layer = nullptr;  // the layer being expanded
  const Int8Plan* int8 = nullptr;           // layers to emit in INT8 (eval of a quantized model)

  std::string who() const { return "layer '" + layer->name + "' (" + layer->op + ")"; }
  Error error(const std::string& message) const {
    return make_error(spec.path + ":" + std::to_string(layer->where.line) + ": " + who() + ": " + message,
                      TDM_INVALID_ARGUMENT);
  }
  const Value& value(ValueId id) const { return *out.graph.value(id); }
  TensorType tensor(Dims dims) const { return TensorType{out.dtype, std::move(dims)}; }
  const Dims& dims(ValueId id) const { return value(id).type.dims; }
  // A node of this layer; its first output is named `output_name` (or "<node>:0").
  Result<std::vector<ValueId>> emit(const std::string& op, const std::string& node_name,
                                    std::vector<ValueId> inputs, std::vector<Attr> attrs,
                                    std::vector<TensorType> outputs,
                                    std::vector<std::string> output_names = {});
  // A parameter of this layer, as the layer reads it: with ZeRO stage 3 the
  // whole tensor gathered from every rank's shard (the parameter itself).
  Result<ValueId> parameter(const std::string& suffix, Dims dims, Initializer init);
  // `shard`, a stage-3 parameter, gathered whole again for this layer (a
  // tied weight); any other value as it is.
  Result<ValueId> gathered(ValueId shard);
  // This rank's slice along `axis` of a parameter of shape `full` (the whole
  // parameter when tensor parallelism is off); `init` describes the whole.
  Result<ValueId> sharded_parameter(const std::string& suffix, Dims full, int axis, Initializer init);
  Result<ValueId> state(const std::string& suffix, Dims dims, double fill);
  // For a node that draws dropout masks (dropout, attention): its own seed,
  // and the s64 step the host feeds as every such node's seed_offset so each
  // step draws new masks. Push the node onto out.dropout_nodes once emitted.
  // `on_slice`: the node works on this rank's slice of a tensor-parallel
  // activation (or its share of the heads), whose mask must be drawn apart
  // from the other ranks' slices: every rank then gets its own seed. The
  // others keep one seed on every rank, so their whole activations stay
  // the same on every rank.
  int64_t dropout_seed(bool on_slice = false) const;
  Result<ValueId> dropout_step();
};

// Expands one layer whose inputs are already resolved; returns its output.
Result<ValueId> expand_layer(Context& ctx, const std::vector<ValueId>& inputs);
// The same, without the checks for inputs that are a rank's slice.
Result<ValueId> expand_layer_whole(Context& ctx, const std::vector<ValueId>& inputs);

}  // namespace tandem::host::lowering::detail
