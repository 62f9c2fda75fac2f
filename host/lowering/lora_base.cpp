#include "lowering/lora_base.hpp"

#include "lowering/again_for_backward.hpp"

namespace tandem::host::lowering {

Result<void> widen_again_for_backward(ModelGraph& model) {
  for (const std::vector<NodeId>& chain : model.narrow_bases)
    if (auto r = make_again_for_backward(model.graph, chain); !r) return r;
  return {};
}

namespace detail {

namespace {

// A frozen parameter of `dtype` that no initializer fills unless given one.
Result<ValueId> frozen(Context& ctx, const std::string& name, tdm_dtype dtype, const Dims& dims,
                       const Initializer* init) {
  auto id = ctx.out.graph.add_value(name, TDM_VALUE_PARAMETER, TensorType{dtype, dims});
  if (!id) return id.error();
  ctx.out.parameters.push_back(*id);
  ctx.out.frozen.insert(*id);
  if (init != nullptr) ctx.out.initializers[*id] = *init;
  return id;
}

}  // namespace

Result<ValueId> projection_weight(Context& ctx, const std::string& suffix, Dims dims, Initializer init) {
  const std::string& base = ctx.spec.lora.base;
  if (!ctx.spec.lora.enabled || base == "f32") return ctx.parameter(suffix, std::move(dims), std::move(init));
  if (ctx.out.zero.shards_parameters())
    return ctx.error("[features.lora] base = \"" + base +
                     "\" with ZeRO stage 3 is not built: use stage 1 or 2");
  const std::string name = ctx.layer->name + "." + suffix;
  if (base == "bf16") {
    auto stored = frozen(ctx, name, TDM_BF16, dims, &init);
    if (!stored) return stored;
    auto wide = ctx.emit("cast", name + ".widen", {*stored}, {}, {ctx.tensor(dims)});
    if (!wide) return wide.error();
    ctx.out.narrow_bases.push_back({ctx.value((*wide)[0]).producer});
    return (*wide)[0];
  }
  // INT8, with no initializer (zeros until a checkpoint fills it): the
  // trainer refuses a fresh start, the base being quantized from the
  // weights a run starts from.
  auto q = frozen(ctx, name, TDM_S8, dims, nullptr);
  if (!q) return q;
  auto scale = ctx.parameter(suffix + kInt8BaseScale, {dims[0]}, Initializer{"ones"});
  if (!scale) return scale;
  auto wide = ctx.emit("cast", name + ".dequantize", {*q}, {}, {ctx.tensor(dims)});
  if (!wide) return wide.error();
  auto rows = ctx.emit("reshape", name + ".scale_rows", {*scale}, {}, {ctx.tensor({dims[0], 1})});
  if (!rows) return rows.error();
  auto w = ctx.emit("mul", name + ".dequantized", {(*wide)[0], (*rows)[0]}, {}, {ctx.tensor(dims)});
  if (!w) return w.error();
  ctx.out.narrow_bases.push_back({ctx.value((*wide)[0]).producer, ctx.value((*w)[0]).producer});
  return (*w)[0];
}

}  // namespace detail

}  // namespace tandem::host::lowering
