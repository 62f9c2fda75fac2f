// The INT8 expansion of `linear` and `conv2d` layers (eval graphs of
// quantized models). For linear:
//
//   x f32 ─► quantize (u8, x_scale, x_zero_point) ─► linear_int8 (s8 weight,
//   f32 bias, output scales, relu fused) ─► y f32
//
// The output stays f32: the next layer may be f32 (softmax, loss, an
// unquantized layer), and a quantized one starts with its own quantize, so
// every layer boundary is one cheap elementwise pass. Fusing requantization
// into linear_int8 (u8 output) would save that pass and is a possible
// follow-up. tanh and sigmoid are not fused (linear_int8 fuses relu only) and
// follow as their own f32 ops.
#include "lowering/int8_layers.hpp"

namespace tandem::host::lowering {

bool has_int8_form(const std::string& layer_op) {
  return layer_op == "linear" || layer_op == "conv2d";
}

}  // namespace tandem::host::lowering

namespace tandem::host::lowering::detail {

Result<ValueId> linear_int8(Context& ctx, ValueId x, const Int8Layer& q) {
  const model::LayerSpec& l = *ctx.layer;
  if (ctx.out.mode == Mode::Train)
    return ctx.error(
        "an INT8 model can only be evaluated; train the f32 model (or use [features.quantize] "
        "mode = \"qat\") and quantize it with `tandem quantize`");
  if (ctx.out.dtype != TDM_F32) return ctx.error("INT8 layers need an f32 graph");
  const int64_t batch = ctx.dims(x)[0], in = ctx.dims(x)[1], out = l.int_attr("out_features", 0);
  if (out <= 0) return ctx.error("out_features must be positive");
  if (q.w_scale.size() != 1 && int64_t(q.w_scale.size()) != out)
    return ctx.error("the INT8 checkpoint has " + std::to_string(q.w_scale.size()) +
                     " weight scales; expected 1 or out_features = " + std::to_string(out));
  auto xq = ctx.emit("quantize", l.name + ".quantize", {x},
                     {{"scale", q.x_scale}, {"zero_point", std::vector<int64_t>{q.x_zero_point}}},
                     {TensorType{TDM_U8, {batch, in}}}, {l.name + ".input_u8"});
  if (!xq) return xq.error();
  auto w = ctx.out.graph.add_value(l.name + ".weight", TDM_VALUE_PARAMETER, TensorType{TDM_S8, {out, in}});
  if (!w) return w.error();
  ctx.out.parameters.push_back(*w);
  std::vector<ValueId> inputs = {(*xq)[0], *w};
  if (l.bool_attr("bias", true)) {
    auto b = ctx.parameter("bias", {out}, Initializer{"zeros"});
    if (!b) return b.error();
    inputs.push_back(*b);
  }
  const std::string act = l.string_attr("activation", "none");
  const bool fused = act == "none" || act == "relu";
  const std::vector<Attr> attrs = {{"x_scale", q.x_scale},
                                   {"x_zero_point", q.x_zero_point},
                                   {"w_scale", q.w_scale},
                                   {"activation", fused ? act : std::string("none")}};
  const std::string product = fused ? l.name : l.name + ".int8";
  auto y = ctx.emit("linear_int8", product, inputs, attrs, {TensorType{TDM_F32, {batch, out}}}, {product});
  if (!y) return y.error();
  if (fused) return (*y)[0];
  auto a =
      ctx.emit(act, l.name + ".activation", {(*y)[0]}, {}, {TensorType{TDM_F32, {batch, out}}}, {l.name});
  if (!a) return a.error();
  return (*a)[0];
}

// conv2d: quantize + conv2d_int8 (f32 out, like linear_int8). Conv layers
// have no fused activation in model files (relu is its own layer).
Result<ValueId> conv2d_int8(Context& ctx, ValueId x, const Int8Layer& q, std::vector<Attr> conv_attrs,
                            const Dims& w_dims, const Dims& y_dims) {
  const model::LayerSpec& l = *ctx.layer;
  if (ctx.out.mode == Mode::Train) return ctx.error("an INT8 model can only be evaluated");
  if (q.w_scale.size() != 1 && int64_t(q.w_scale.size()) != w_dims[0])
    return ctx.error("the INT8 checkpoint has " + std::to_string(q.w_scale.size()) +
                     " weight scales; expected 1 or out_channels = " + std::to_string(w_dims[0]));
  auto xq = ctx.emit("quantize", l.name + ".quantize", {x},
                     {{"scale", q.x_scale}, {"zero_point", std::vector<int64_t>{q.x_zero_point}}},
                     {TensorType{TDM_U8, ctx.dims(x)}}, {l.name + ".input_u8"});
  if (!xq) return xq.error();
  auto w = ctx.out.graph.add_value(l.name + ".weight", TDM_VALUE_PARAMETER, TensorType{TDM_S8, w_dims});
  if (!w) return w.error();
  ctx.out.parameters.push_back(*w);
  std::vector<ValueId> inputs = {(*xq)[0], *w};
  if (l.bool_attr("bias", true)) {
    auto b = ctx.parameter("bias", {w_dims[0]}, Initializer{"zeros"});
    if (!b) return b.error();
    inputs.push_back(*b);
  }
  conv_attrs.push_back({"x_scale", q.x_scale});
  conv_attrs.push_back({"x_zero_point", q.x_zero_point});
  conv_attrs.push_back({"w_scale", q.w_scale});
  auto y = ctx.emit("conv2d_int8", l.name, inputs, conv_attrs, {TensorType{TDM_F32, y_dims}}, {l.name});
  if (!y) return y.error();
  return (*y)[0];
}

}  // namespace tandem::host::lowering::detail
