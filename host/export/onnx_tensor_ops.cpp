// Activations, elementwise and reductions, softmax, the norms, shapes,
// embedding and quantize/dequantize: mostly one ONNX node each. gelu and
// silu are spelled out (opset 17 has neither): x·Φ(x) with Erf or the tanh
// form, x·sigmoid(x).
#include <cmath>

#include "export/onnx_ops.hpp"
#include "ops/op_table.hpp"

namespace tandem::host::exporting {
namespace {

using ops::float_attr;
using ops::int_attr;
using ops::ints_attr;
using ops::string_attr;

tdm_dtype dtype_of(OnnxBuilder& b, ValueId id) {
  return b.graph().value(id)->type.dtype;
}

Result<void> unary(OnnxBuilder& b, const Node& n, const char* op_type) {
  b.node(op_type, {b.name(n.inputs[0])}, {b.name(n.outputs[0])}, n.name);
  return {};
}

Result<void> binary(OnnxBuilder& b, const Node& n, const char* op_type) {
  b.node(op_type, {b.name(n.inputs[0]), b.name(n.inputs[1])}, {b.name(n.outputs[0])}, n.name);
  return {};
}

Result<void> relu(OnnxBuilder& b, const Node& n) {
  return unary(b, n, "Relu");
}
Result<void> tanh_op(OnnxBuilder& b, const Node& n) {
  return unary(b, n, "Tanh");
}
Result<void> sigmoid(OnnxBuilder& b, const Node& n) {
  return unary(b, n, "Sigmoid");
}
Result<void> copy(OnnxBuilder& b, const Node& n) {
  return unary(b, n, "Identity");
}
Result<void> add(OnnxBuilder& b, const Node& n) {
  return binary(b, n, "Add");
}
Result<void> sub(OnnxBuilder& b, const Node& n) {
  return binary(b, n, "Sub");
}
Result<void> mul(OnnxBuilder& b, const Node& n) {
  return binary(b, n, "Mul");
}

Result<void> leaky_relu(OnnxBuilder& b, const Node& n) {
  onnx::NodeProto& node = b.node("LeakyRelu", {b.name(n.inputs[0])}, {b.name(n.outputs[0])}, n.name);
  set_float(node, "alpha", float(float_attr(n, "negative_slope")));
  return {};
}

Result<void> silu(OnnxBuilder& b, const Node& n) {
  const std::string x = b.name(n.inputs[0]), s = b.fresh(n.name + "/sigmoid");
  b.node("Sigmoid", {x}, {s}, n.name);
  b.node("Mul", {x, s}, {b.name(n.outputs[0])}, n.name);
  return {};
}

// gelu: x·Φ(x) = 0.5·x·(1 + erf(x/√2)); approximate = "tanh":
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
Result<void> gelu(OnnxBuilder& b, const Node& n) {
  const tdm_dtype t = dtype_of(b, n.inputs[0]);
  const std::string x = b.name(n.inputs[0]);
  std::string inner = b.fresh(n.name + "/inner"), phi = b.fresh(n.name + "/phi");
  if (string_attr(n, "approximate") == "tanh") {
    const std::string x2 = b.fresh(n.name + "/x2"), x3 = b.fresh(n.name + "/x3");
    const std::string cubic = b.fresh(n.name + "/cubic"), sum = b.fresh(n.name + "/sum");
    b.node("Mul", {x, x}, {x2}, n.name);
    b.node("Mul", {x2, x}, {x3}, n.name);
    b.node("Mul", {x3, b.scalar(n.name + "/c", t, 0.044715)}, {cubic}, n.name);
    b.node("Add", {x, cubic}, {sum}, n.name);
    const std::string scaled = b.fresh(n.name + "/scaled");
    b.node("Mul", {sum, b.scalar(n.name + "/k", t, std::sqrt(2.0 / M_PI))}, {scaled}, n.name);
    b.node("Tanh", {scaled}, {inner}, n.name);
  } else {
    const std::string scaled = b.fresh(n.name + "/scaled");
    b.node("Div", {x, b.scalar(n.name + "/sqrt2", t, std::sqrt(2.0))}, {scaled}, n.name);
    b.node("Erf", {scaled}, {inner}, n.name);
  }
  b.node("Add", {inner, b.scalar(n.name + "/one", t, 1.0)}, {phi}, n.name);
  const std::string half = b.fresh(n.name + "/half");
  b.node("Mul", {x, b.scalar(n.name + "/0.5", t, 0.5)}, {half}, n.name);
  b.node("Mul", {half, phi}, {b.name(n.outputs[0])}, n.name);
  return {};
}

// softplus: ONNX's Softplus is log(1 + exp(z)) without beta or threshold,
// so y = Where(z > threshold, x, Softplus(z) / beta) with z = beta·x.
Result<void> softplus(OnnxBuilder& b, const Node& n) {
  const tdm_dtype t = dtype_of(b, n.inputs[0]);
  const std::string x = b.name(n.inputs[0]), beta = b.scalar(n.name + "/beta", t, float_attr(n, "beta"));
  const std::string z = b.fresh(n.name + "/z"), soft = b.fresh(n.name + "/softplus");
  const std::string curve = b.fresh(n.name + "/curve"), linear = b.fresh(n.name + "/linear");
  b.node("Mul", {x, beta}, {z}, n.name);
  b.node("Softplus", {z}, {soft}, n.name);
  b.node("Div", {soft, beta}, {curve}, n.name);
  b.node("Greater", {z, b.scalar(n.name + "/threshold", t, float_attr(n, "threshold"))}, {linear}, n.name);
  b.node("Where", {linear, x, curve}, {b.name(n.outputs[0])}, n.name);
  return {};
}

// scale: y = alpha·x + beta.
Result<void> scale(OnnxBuilder& b, const Node& n) {
  const tdm_dtype t = dtype_of(b, n.inputs[0]);
  const std::string scaled = b.fresh(n.name + "/scaled");
  b.node("Mul", {b.name(n.inputs[0]), b.scalar(n.name + "/alpha", t, float_attr(n, "alpha"))}, {scaled},
         n.name);
  b.node("Add", {scaled, b.scalar(n.name + "/beta", t, float_attr(n, "beta"))}, {b.name(n.outputs[0])},
         n.name);
  return {};
}

Result<void> softmax_like(OnnxBuilder& b, const Node& n, const char* op_type) {
  onnx::NodeProto& node = b.node(op_type, {b.name(n.inputs[0])}, {b.name(n.outputs[0])}, n.name);
  set_int(node, "axis", int_attr(n, "axis"));
  return {};
}
Result<void> softmax(OnnxBuilder& b, const Node& n) {
  return softmax_like(b, n, "Softmax");
}
Result<void> log_softmax(OnnxBuilder& b, const Node& n) {
  return softmax_like(b, n, "LogSoftmax");
}

// layer_norm over the last dim; Tandem's mean and rstd outputs are
// training state, not computed here (nothing in an evaluation reads them).
Result<void> layer_norm(OnnxBuilder& b, const Node& n) {
  onnx::NodeProto& node =
      b.node("LayerNormalization", {b.name(n.inputs[0]), b.name(n.inputs[1]), b.name(n.inputs[2])},
             {b.name(n.outputs[0])}, n.name);
  set_int(node, "axis", -1);
  set_float(node, "epsilon", float(float_attr(n, "epsilon")));
  return {};
}

Result<void> batch_norm_inference(OnnxBuilder& b, const Node& n) {
  std::vector<std::string> in;
  for (ValueId id : n.inputs) in.push_back(b.name(id));
  onnx::NodeProto& node = b.node("BatchNormalization", in, {b.name(n.outputs[0])}, n.name);
  set_float(node, "epsilon", float(float_attr(n, "epsilon")));
  return {};
}

Result<void> reduce(OnnxBuilder& b, const Node& n, bool mean) {
  const std::vector<int64_t> axes = ints_attr(n.attrs, "axes", {});
  const int64_t keep = int_attr(n, "keepdims");
  // Opset 17: ReduceSum takes its axes as an input, ReduceMean as an attribute.
  std::vector<std::string> in = {b.name(n.inputs[0])};
  if (!mean && !axes.empty()) in.push_back(b.ints(n.name + "/axes", axes, {int64_t(axes.size())}));
  onnx::NodeProto& node = b.node(mean ? "ReduceMean" : "ReduceSum", in, {b.name(n.outputs[0])}, n.name);
  if (mean && !axes.empty()) set_ints(node, "axes", axes);
  set_int(node, "keepdims", keep);
  return {};
}
Result<void> reduce_sum(OnnxBuilder& b, const Node& n) {
  return reduce(b, n, false);
}
Result<void> reduce_mean(OnnxBuilder& b, const Node& n) {
  return reduce(b, n, true);
}

// The target is the output's shape with the batch dim inferred (-1).
Result<void> reshape(OnnxBuilder& b, const Node& n) {
  const std::vector<int64_t> target = b.reshape_target(n.outputs[0]);
  int inferred = 0;
  for (int64_t d : target) inferred += d < 0 ? 1 : 0;
  if (inferred > 1) return not_exportable(n, "a reshape with more than one batch-dependent dim");
  const std::string shape = b.ints(n.name + "/shape", target, {int64_t(target.size())});
  b.node("Reshape", {b.name(n.inputs[0]), shape}, {b.name(n.outputs[0])}, n.name);
  return {};
}

Result<void> transpose(OnnxBuilder& b, const Node& n) {
  const size_t rank = b.graph().value(n.inputs[0])->type.dims.size();
  std::vector<int64_t> reversed(rank);
  for (size_t i = 0; i < rank; ++i) reversed[i] = int64_t(rank - 1 - i);
  onnx::NodeProto& node = b.node("Transpose", {b.name(n.inputs[0])}, {b.name(n.outputs[0])}, n.name);
  set_ints(node, "perm", ints_attr(n.attrs, "perm", reversed));
  return {};
}

Result<void> concat(OnnxBuilder& b, const Node& n) {
  std::vector<std::string> in;
  for (ValueId id : n.inputs) in.push_back(b.name(id));
  set_int(b.node("Concat", in, {b.name(n.outputs[0])}, n.name), "axis", int_attr(n, "axis"));
  return {};
}

Result<void> cast(OnnxBuilder& b, const Node& n) {
  const int32_t to = onnx_type(b.graph().value(n.outputs[0])->type.dtype);
  if (to == 0) return not_exportable(n, "a cast to a dtype ONNX has not");
  set_int(b.node("Cast", {b.name(n.inputs[0])}, {b.name(n.outputs[0])}, n.name), "to", to);
  return {};
}

// embedding: rows of the table (Gather along axis 0); a slice of a
// vocabulary-parallel table would need its offset.
Result<void> embedding(OnnxBuilder& b, const Node& n) {
  if (int_attr(n, "vocab_start") >= 0)
    return not_exportable(n, "a vocabulary-parallel embedding slice (export a run of one process)");
  set_int(b.node("Gather", {b.name(n.inputs[0]), b.name(n.inputs[1])}, {b.name(n.outputs[0])}, n.name),
          "axis", 0);
  return {};
}

// quantize / dequantize: QuantizeLinear / DequantizeLinear, with the output
// dtype (u8 or s8) carried by the zero point's.
Result<void> quantize_like(OnnxBuilder& b, const Node& n, bool quantize) {
  const std::vector<double> s = floats_attr(n, "scale");
  const std::vector<int64_t> z = ints_attr(n.attrs, "zero_point", {0});
  const tdm_dtype q = b.graph().value(quantize ? n.outputs[0] : n.inputs[0])->type.dtype;
  if (q != TDM_U8 && q != TDM_S8) return not_exportable(n, "quantized data other than u8 or s8");
  const std::vector<float> scales(s.begin(), s.end());
  std::vector<uint8_t> zeros;
  for (int64_t v : z) zeros.push_back(uint8_t(q == TDM_U8 ? v : int8_t(v)));
  const bool per_channel = scales.size() > 1;
  const std::vector<int64_t> dims =
      per_channel ? std::vector<int64_t>{int64_t(scales.size())} : std::vector<int64_t>{};
  const std::string scale = b.floats(n.name + "/scale", scales, dims);
  const std::string zp = b.bytes(n.name + "/zero_point", onnx_type(q), zeros.data(), zeros.size(), dims);
  onnx::NodeProto& node = b.node(quantize ? "QuantizeLinear" : "DequantizeLinear",
                                 {b.name(n.inputs[0]), scale, zp}, {b.name(n.outputs[0])}, n.name);
  if (per_channel) set_int(node, "axis", int_attr(n, "axis"));
  return {};
}
Result<void> quantize(OnnxBuilder& b, const Node& n) {
  return quantize_like(b, n, true);
}
Result<void> dequantize(OnnxBuilder& b, const Node& n) {
  return quantize_like(b, n, false);
}

}  // namespace

void add_tensor_converters(ConverterTable& table) {
  table.emplace("relu", relu);
  table.emplace("tanh", tanh_op);
  table.emplace("sigmoid", sigmoid);
  table.emplace("leaky_relu", leaky_relu);
  table.emplace("gelu", gelu);
  table.emplace("silu", silu);
  table.emplace("softplus", softplus);
  table.emplace("copy", copy);
  table.emplace("add", add);
  table.emplace("sub", sub);
  table.emplace("mul", mul);
  table.emplace("scale", scale);
  table.emplace("softmax", softmax);
  table.emplace("log_softmax", log_softmax);
  table.emplace("layer_norm", layer_norm);
  table.emplace("batch_norm_inference", batch_norm_inference);
  table.emplace("reduce_sum", reduce_sum);
  table.emplace("reduce_mean", reduce_mean);
  table.emplace("reshape", reshape);
  table.emplace("transpose", transpose);
  table.emplace("concat", concat);
  table.emplace("cast", cast);
  table.emplace("embedding", embedding);
  table.emplace("quantize", quantize);
  table.emplace("dequantize", dequantize);
}

}  // namespace tandem::host::exporting
