// linear, matmul, conv2d and pooling; linear_int8 and conv2d_int8 with the
// catalog's arithmetic exactly: MatMulInteger / ConvInteger (the u8 input
// less its zero point times the s8 weights, accumulated in int32), Cast to
// f32, times f32(x_scale·w_scale) per output channel, plus the bias. (The
// f32 QDQ form — DequantizeLinear, then Gemm — rounds the products, and the
// next layer's QuantizeLinear turns such last-bit differences into whole
// quantization steps: 0.05 on Fashion-MNIST logits.)
#include "export/onnx_ops.hpp"
#include "ops/op_table.hpp"

namespace tandem::host::exporting {
namespace {

using ops::float_attr;
using ops::int_attr;
using ops::ints_attr;
using ops::string_attr;

// Gemm(x, w, bias?, transB=1), then the fused activation.
Result<void> gemm(OnnxBuilder& b, const Node& n, const std::string& x, const std::string& w) {
  std::vector<std::string> in = {x, w};
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) in.push_back(b.name(n.inputs[2]));
  const std::string y = b.fresh(n.name + "/gemm");
  set_int(b.node("Gemm", in, {y}, n.name), "transB", 1);
  return activation(b, n, string_attr(n, "activation"), y, b.name(n.outputs[0]));
}

Result<void> linear(OnnxBuilder& b, const Node& n) {
  if (b.graph().value(n.inputs[0])->type.dims.size() != 2)
    return not_exportable(n, "linear of an input of rank other than 2");
  return gemm(b, n, b.name(n.inputs[0]), b.name(n.inputs[1]));
}

// The last two axes swapped, for matmul's transpose_a / transpose_b.
std::string swap_last(OnnxBuilder& b, const Node& n, ValueId id) {
  const size_t rank = b.graph().value(id)->type.dims.size();
  std::vector<int64_t> perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = int64_t(i);
  std::swap(perm[rank - 1], perm[rank - 2]);
  const std::string out = b.fresh(n.name + "/transposed");
  set_ints(b.node("Transpose", {b.name(id)}, {out}, n.name), "perm", perm);
  return out;
}

Result<void> matmul(OnnxBuilder& b, const Node& n) {
  const std::string a = int_attr(n, "transpose_a") ? swap_last(b, n, n.inputs[0]) : b.name(n.inputs[0]);
  const std::string c = int_attr(n, "transpose_b") ? swap_last(b, n, n.inputs[1]) : b.name(n.inputs[1]);
  b.node("MatMul", {a, c}, {b.name(n.outputs[0])}, n.name);
  return {};
}

// Conv(x, w, bias?) with the catalog's stride, padding, dilation, groups.
Result<void> conv(OnnxBuilder& b, const Node& n, const std::string& x, const std::string& w,
                  const std::string& y) {
  std::vector<std::string> in = {x, w};
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) in.push_back(b.name(n.inputs[2]));
  const std::vector<int64_t> pad = ints_attr(n.attrs, "padding", {0, 0});
  onnx::NodeProto& node = b.node("Conv", in, {y}, n.name);
  set_ints(node, "strides", ints_attr(n.attrs, "stride", {1, 1}));
  set_ints(node, "pads", {pad[0], pad[1], pad[0], pad[1]});
  set_ints(node, "dilations", ints_attr(n.attrs, "dilation", {1, 1}));
  set_int(node, "group", int_attr(n, "groups"));
  return {};
}

Result<void> conv2d(OnnxBuilder& b, const Node& n) {
  return conv(b, n, b.name(n.inputs[0]), b.name(n.inputs[1]), b.name(n.outputs[0]));
}

Result<void> pool(OnnxBuilder& b, const Node& n, const char* op_type) {
  const std::vector<int64_t> kernel = ints_attr(n.attrs, "kernel", {});
  const std::vector<int64_t> pad = ints_attr(n.attrs, "padding", {0, 0});
  onnx::NodeProto& node = b.node(op_type, {b.name(n.inputs[0])}, {b.name(n.outputs[0])}, n.name);
  set_ints(node, "kernel_shape", kernel);
  set_ints(node, "strides", ints_attr(n.attrs, "stride", kernel));
  set_ints(node, "pads", {pad[0], pad[1], pad[0], pad[1]});
  if (std::string(op_type) == "AveragePool")
    set_int(node, "count_include_pad", int_attr(n.attrs, "count_include_pad", 0));
  return {};
}

Result<void> max_pool2d(OnnxBuilder& b, const Node& n) {
  return pool(b, n, "MaxPool");
}
Result<void> avg_pool2d(OnnxBuilder& b, const Node& n) {
  return pool(b, n, "AveragePool");
}

// The int32 accumulator `acc` as f32, times m[c] = f32(x_scale·w_scale[c])
// along `channel_dims` ({N} for linear, {1, K, 1, 1} for conv), plus the
// bias (the same shape), then the activation into the node's output.
Result<void> rescale(OnnxBuilder& b, const Node& n, const std::string& acc,
                     std::vector<int64_t> channel_dims) {
  const std::vector<double> ws = floats_attr(n, "w_scale");
  const double xs = float_attr(n.attrs, "x_scale", 1.0);
  std::vector<float> m;
  for (double w : ws) m.push_back(float(float(xs) * float(w)));
  const bool per_channel = m.size() > 1;
  const std::string as_float = b.fresh(n.name + "/acc_f32"), scaled = b.fresh(n.name + "/scaled");
  set_int(b.node("Cast", {acc}, {as_float}, n.name), "to", onnx::TensorProto::FLOAT);
  const std::string multiplier =
      b.floats(n.name + "/multiplier", m, per_channel ? channel_dims : std::vector<int64_t>{});
  b.node("Mul", {as_float, multiplier}, {scaled}, n.name);
  std::string y = scaled;
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    std::string bias = b.name(n.inputs[2]);
    if (channel_dims.size() > 1) {  // conv: [K] -> [1, K, 1, 1]
      const std::string shaped = b.fresh(n.name + "/bias");
      b.node("Reshape", {bias, b.ints(n.name + "/bias_shape", channel_dims, {int64_t(channel_dims.size())})},
             {shaped}, n.name);
      bias = shaped;
    }
    y = b.fresh(n.name + "/biased");
    b.node("Add", {scaled, bias}, {y}, n.name);
  }
  return activation(b, n, string_attr(n, "activation"), y, b.name(n.outputs[0]));
}

std::string input_zero_point(OnnxBuilder& b, const Node& n) {
  const auto zero = static_cast<uint8_t>(int_attr(n, "x_zero_point"));
  return b.bytes(n.name + "/x_zero_point", onnx::TensorProto::UINT8, &zero, 1, {});
}

Result<void> linear_int8(OnnxBuilder& b, const Node& n) {
  const std::vector<int64_t>& w = b.graph().value(n.inputs[1])->type.dims;  // [N, K]
  const std::string wt = b.fresh(n.name + "/w_t"), acc = b.fresh(n.name + "/acc");
  set_ints(b.node("Transpose", {b.name(n.inputs[1])}, {wt}, n.name), "perm", {1, 0});
  b.node("MatMulInteger", {b.name(n.inputs[0]), wt, input_zero_point(b, n)}, {acc}, n.name);
  return rescale(b, n, acc, {w[0]});
}

Result<void> conv2d_int8(OnnxBuilder& b, const Node& n) {
  const std::vector<int64_t>& w = b.graph().value(n.inputs[1])->type.dims;  // [K, C/g, R, S]
  const std::vector<int64_t> pad = ints_attr(n.attrs, "padding", {0, 0});
  const std::string acc = b.fresh(n.name + "/acc");
  // ConvInteger pads with the zero point: a padded tap adds (z - z)·w = 0,
  // as the catalog's real 0.0 does.
  onnx::NodeProto& node = b.node(
      "ConvInteger", {b.name(n.inputs[0]), b.name(n.inputs[1]), input_zero_point(b, n)}, {acc}, n.name);
  set_ints(node, "strides", ints_attr(n.attrs, "stride", {1, 1}));
  set_ints(node, "pads", {pad[0], pad[1], pad[0], pad[1]});
  set_ints(node, "dilations", ints_attr(n.attrs, "dilation", {1, 1}));
  set_int(node, "group", int_attr(n, "groups"));
  return rescale(b, n, acc, {1, w[0], 1, 1});
}

}  // namespace

void add_dense_converters(ConverterTable& table) {
  table.emplace("linear", linear);
  table.emplace("matmul", matmul);
  table.emplace("conv2d", conv2d);
  table.emplace("max_pool2d", max_pool2d);
  table.emplace("avg_pool2d", avg_pool2d);
  table.emplace("linear_int8", linear_int8);
  table.emplace("conv2d_int8", conv2d_int8);
}

}  // namespace tandem::host::exporting
