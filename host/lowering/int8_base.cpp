#include "lowering/int8_base.hpp"

#include "lowering/again_for_backward.hpp"

namespace tandem::host::lowering {

Result<void> dequantize_again_for_backward(ModelGraph& model) {
  for (const auto& [cast, mul] : model.int8_bases)
    if (auto r = make_again_for_backward(model.graph, {cast, mul}); !r) return r;
  return {};
}

namespace detail {

Result<ValueId> projection_weight(Context& ctx, const std::string& suffix, Dims dims, Initializer init) {
  if (!ctx.spec.lora.enabled || ctx.spec.lora.base != "int8")
    return ctx.parameter(suffix, std::move(dims), std::move(init));
  if (ctx.out.zero.shards_parameters())
    return ctx.error("[features.lora] base = \"int8\" with ZeRO stage 3 is not built: use stage 1 or 2");
  const std::string name = ctx.layer->name + "." + suffix;
  // No initializer (zeros until a checkpoint fills it): the trainer refuses
  // a fresh start, the base being quantized from the weights a run starts from.
  auto q = ctx.out.graph.add_value(name, TDM_VALUE_PARAMETER, TensorType{TDM_S8, dims});
  if (!q) return q.error();
  ctx.out.parameters.push_back(*q);
  ctx.out.frozen.insert(*q);
  auto scale = ctx.parameter(suffix + kInt8BaseScale, {dims[0]}, Initializer{"ones"});
  if (!scale) return scale;
  auto wide = ctx.emit("cast", name + ".dequantize", {*q}, {}, {ctx.tensor(dims)});
  if (!wide) return wide.error();
  auto rows = ctx.emit("reshape", name + ".scale_rows", {*scale}, {}, {ctx.tensor({dims[0], 1})});
  if (!rows) return rows.error();
  auto w = ctx.emit("mul", name + ".dequantized", {(*wide)[0], (*rows)[0]}, {}, {ctx.tensor(dims)});
  if (!w) return w.error();
  ctx.out.int8_bases.emplace_back(ctx.value((*wide)[0]).producer, ctx.value((*w)[0]).producer);
  return (*w)[0];
}

}  // namespace detail

}  // namespace tandem::host::lowering
