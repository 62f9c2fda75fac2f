// Tandem SDK — the shape rules of the products (tandem/op_shapes.hpp):
// matmul, linear, conv2d and pooling with their gradients, the INT8 products
// and quantization. Header-only, standard library only.
#ifndef TANDEM_OP_SHAPES_PRODUCTS_HPP
#define TANDEM_OP_SHAPES_PRODUCTS_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tandem/op_shape_query.hpp"

namespace tandem::shapes {
namespace detail {

// --- matmul -----------------------------------------------------------------

// Batched, numpy-broadcast batch dims.
inline Outputs matmul_shape(const Query& q) {
  const TensorShape& a = q.input(0, "a");
  const TensorShape& b = q.input(1, "b");
  if (a.dims.size() < 2 || b.dims.size() < 2) fail("a and b must have rank >= 2");
  if (a.dtype != b.dtype) fail("a is " + str(a) + " but b is " + str(b));
  const bool ta = q.int_attr("transpose_a") != 0, tb = q.int_attr("transpose_b") != 0;
  const size_t ra = a.dims.size(), rb = b.dims.size();
  const int64_t m = a.dims[ra - (ta ? 1 : 2)], k = a.dims[ra - (ta ? 2 : 1)];
  const int64_t kb = b.dims[rb - (tb ? 1 : 2)], n = b.dims[rb - (tb ? 2 : 1)];
  if (k != kb) fail("a " + str(a) + " and b " + str(b) + " disagree on K");
  auto batch = broadcast(Dims(a.dims.begin(), a.dims.end() - 2), Dims(b.dims.begin(), b.dims.end() - 2));
  if (!batch) fail("the batch dims of a " + str(a) + " and b " + str(b) + " do not broadcast");
  batch->push_back(m);
  batch->push_back(n);
  return Outputs{{a.dtype, *batch}};
}

// --- linear -----------------------------------------------------------------

inline Outputs linear_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const TensorShape& w = q.input(1, "w");
  if (x.dims.size() != 2 || w.dims.size() != 2 || x.dims[1] != w.dims[1])
    fail("x " + str(x) + " and w " + str(w) + " must be [N, I] and [O, I]");
  if (w.dtype != x.dtype) fail("x " + str(x) + " and w " + str(w) + " must have one dtype");
  const tdm_dtype y = q.product_output_dtype(0, x.dtype);
  const TensorShape* bias = q.optional(2);
  if (bias != nullptr && (bias->dims != Dims{w.dims[0]} || bias->dtype != y))
    fail("bias " + str(*bias) + " must be " + dtype_name(y) + "[" + std::to_string(w.dims[0]) +
         "], the output's dtype");
  return Outputs{{y, {x.dims[0], w.dims[0]}}};
}

inline Outputs linear_grad_input_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& w = q.input(1, "w");
  if (dy.dims.size() != 2 || w.dims.size() != 2 || dy.dims[1] != w.dims[0])
    fail("dy " + str(dy) + " and w " + str(w) + " must be [N, O] and [O, I]");
  const TensorShape dx{dy.dtype, {dy.dims[0], w.dims[1]}};
  addend_like(q, 2, dx);
  return Outputs{dx};
}

inline Outputs linear_grad_weight_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& x = q.input(1, "x");
  if (dy.dims.size() != 2 || x.dims.size() != 2 || dy.dims[0] != x.dims[0])
    fail("dy " + str(dy) + " and x " + str(x) + " must be [N, O] and [N, I]");
  if (x.dtype != dy.dtype) fail("dy " + str(dy) + " and x " + str(x) + " must have one dtype");
  const tdm_dtype dw = q.product_output_dtype(0, dy.dtype);
  Outputs out = {{dw, {dy.dims[1], x.dims[1]}}};
  if (q.int_attr("has_bias") != 0) out.push_back({dw, {dy.dims[1]}});
  return out;
}

// --- conv2d -----------------------------------------------------------------

// An `ints` attribute over the two spatial dims: one entry stands for both.
// A list of another length stays as it is: the convolution and pooling
// rules check the lengths themselves, after the operands' ranks.
inline std::vector<int64_t> spatial_pair(std::vector<int64_t> v) {
  if (v.size() == 1) v.push_back(v[0]);
  return v;
}

struct ConvGeometry {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};

inline ConvGeometry conv_geometry(const Query& q) {
  return {spatial_pair(q.ints_attr("stride")), spatial_pair(q.ints_attr("padding")),
          spatial_pair(q.ints_attr("dilation")), q.int_attr("groups")};
}

// y [N, K, P, Q] of x [N, C, H, W] and w [K, C/g, R, S].
inline Dims conv_output(const ConvGeometry& geo, const Dims& x, const Dims& w) {
  if (x.size() != 4 || w.size() != 4) fail("x and w must be rank 4 (NCHW, KCRS)");
  if (geo.stride.size() != 2 || geo.padding.size() != 2 || geo.dilation.size() != 2)
    fail("stride, padding and dilation take 1 or 2 values");
  if (geo.groups < 1 || x[1] % geo.groups != 0 || w[0] % geo.groups != 0 || w[1] != x[1] / geo.groups)
    fail("groups = " + std::to_string(geo.groups) + " must divide C = " + std::to_string(x[1]) +
         " and K = " + std::to_string(w[0]) + ", and w must have C/groups channels");
  const auto p = window_out(x[2], w[2], geo.stride[0], geo.padding[0], geo.dilation[0]);
  const auto r = window_out(x[3], w[3], geo.stride[1], geo.padding[1], geo.dilation[1]);
  if (!p || !r) fail("the filter " + dims_str(w) + " does not fit the padded input " + dims_str(x));
  return Dims{x[0], w[0], *p, *r};
}

inline Outputs conv2d_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const TensorShape& w = q.input(1, "w");
  Dims y = conv_output(conv_geometry(q), x.dims, w.dims);
  const TensorShape* bias = q.optional(2);
  if (bias != nullptr && bias->dims != Dims{w.dims[0]})
    fail("bias " + str(*bias) + " must be [" + std::to_string(w.dims[0]) + "]");
  return Outputs{{x.dtype, std::move(y)}};
}

// dx's H and W are not a function of dy's (stride > 1 drops rows): they
// come from the declared output, checked against dy.
inline Outputs conv2d_grad_input_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& w = q.input(1, "w");
  const TensorShape& dx = q.declared(0, "input's shape");
  if (conv_output(conv_geometry(q), dx.dims, w.dims) != dy.dims)
    fail("dy " + str(dy) + " is not the output of dx " + str(dx) + " and w " + str(w));
  return Outputs{{dy.dtype, dx.dims}};
}

inline Outputs conv2d_grad_weight_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& x = q.input(1, "x");
  const ConvGeometry geo = conv_geometry(q);
  const TensorShape& dw = q.declared(0, "kernel size");
  if (conv_output(geo, x.dims, dw.dims) != dy.dims)
    fail("dy " + str(dy) + " is not the output of x " + str(x) + " and w " + str(dw));
  Outputs out = {{dy.dtype, dw.dims}};
  if (q.int_attr("has_bias") != 0) out.push_back({dy.dtype, {dw.dims[0]}});
  return out;
}

// --- pooling ----------------------------------------------------------------

// y [N, C, P, Q] of x [N, C, H, W] under the window attributes (the stride
// defaults to the kernel).
inline Dims pool_output(const Query& q, const Dims& x) {
  if (x.size() != 4) fail("x must be rank 4 (NCHW), got " + dims_str(x));
  const std::vector<int64_t> k = spatial_pair(q.ints_attr("kernel", {}));  // required: no default
  const std::vector<int64_t> s = spatial_pair(q.ints_attr("stride", k));
  const std::vector<int64_t> p = spatial_pair(q.ints_attr("padding"));
  if (k.size() != 2 || s.size() != 2 || p.size() != 2) fail("kernel, stride and padding take 1 or 2 values");
  for (size_t d = 0; d < 2; ++d)
    if (p[d] > k[d] / 2) fail("padding may be at most half the kernel");
  const auto ph = window_out(x[2], k[0], s[0], p[0], 1), pw = window_out(x[3], k[1], s[1], p[1], 1);
  if (!ph || !pw) fail("the window does not fit the padded input " + dims_str(x));
  return Dims{x[0], x[1], *ph, *pw};
}

// max_pool2d and avg_pool2d.
inline Outputs pool2d_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  return Outputs{{x.dtype, pool_output(q, x.dims)}};
}

inline Outputs max_pool2d_grad_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& x = q.input(1, "x");
  if (pool_output(q, x.dims) != dy.dims) fail("dy " + str(dy) + " is not the pooled shape of x " + str(x));
  return Outputs{{dy.dtype, x.dims}};
}

// avg_pool2d_grad has no x: dx's shape is the declared output's.
inline Outputs avg_pool2d_grad_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& dx = q.declared(0, "input's shape");
  if (pool_output(q, dx.dims) != dy.dims) fail("dy " + str(dy) + " is not the pooled shape of dx " + str(dx));
  return Outputs{{dy.dtype, dx.dims}};
}

// --- INT8 and quantization --------------------------------------------------

// A scale a kernel multiplies by in f32: positive and finite there.
inline void f32_scale(double s, const char* name) {
  if (!(s > 0) || !std::isfinite(s) || !std::isfinite(float(s)) || float(s) <= 0)
    fail(std::string("every ") + name + " must be positive and finite in f32, got " + std::to_string(s));
}

// The INT8 products' scales and bound: x_scale, w_scale with 1 or `rows`
// entries, and a reduction of at most 2^16 products, past which s32 sums
// could overflow (sdk/ops.md).
inline void int8_product(const Query& q, int64_t rows, int64_t reduction, const char* rows_name) {
  if (reduction > 65536)
    fail("the reduction of " + std::to_string(reduction) +
         " products exceeds 65536, where s32 sums could overflow");
  f32_scale(q.float_attr("x_scale", 0.0), "x_scale");  // required: the catalog has made sure it is given
  const std::vector<double> w = q.floats_attr("w_scale");
  if (w.size() != 1 && int64_t(w.size()) != rows)
    fail("w_scale has " + std::to_string(w.size()) + " entries; expected 1 or " + rows_name + " = " +
         std::to_string(rows));
  for (double s : w) f32_scale(s, "w_scale");
}

// A quantization grid over `dims` with integers in [lo, hi] (sdk/ops.md
// "quantize"): scale and zero_point of one entry, or one per channel along
// `axis`.
inline void quant_grid(const Query& q, const Dims& dims, int64_t lo, int64_t hi) {
  const std::vector<double> scale = q.floats_attr("scale");
  if (scale.empty()) fail("attribute 'scale' is empty");
  for (double s : scale) f32_scale(s, "scale");
  const std::vector<int64_t> zero = q.ints_attr("zero_point");
  if (zero.size() != scale.size() && zero.size() != 1)
    fail("zero_point has " + std::to_string(zero.size()) + " entries but scale has " +
         std::to_string(scale.size()));
  for (int64_t z : zero)
    if (z < lo || z > hi)
      fail("zero point " + std::to_string(z) + " is outside " + std::to_string(lo) + ".." +
           std::to_string(hi));
  if (scale.size() == 1) return;
  if (dims.empty()) fail("per-channel scales need a tensor of rank >= 1");
  const size_t a = axis(q.int_attr("axis"), dims.size(), "axis");
  if (int64_t(scale.size()) != dims[a])
    fail("scale has " + std::to_string(scale.size()) + " entries but dim " + std::to_string(a) + " of " +
         dims_str(dims) + " is " + std::to_string(dims[a]));
}

// The integers of an 8-bit or s32 dtype.
inline std::pair<int64_t, int64_t> int_range(tdm_dtype dt) {
  if (dt == TDM_U8) return {0, 255};
  if (dt == TDM_S8) return {-128, 127};
  return {INT32_MIN, INT32_MAX};
}

// fake_quant's grid: [quant_min, quant_max] within -128..255, and scale
// given or computed from x (then per channel along `axis` when asked).
inline void fake_quant_grid(const Query& q, const Dims& dims) {
  const int64_t qmin = q.int_attr("quant_min"), qmax = q.int_attr("quant_max");
  if (qmin < -128 || qmax > 255 || qmin >= qmax)
    fail("need -128 <= quant_min < quant_max <= 255, got " + std::to_string(qmin) + ", " +
         std::to_string(qmax));
  if (q.has_attr("scale")) return quant_grid(q, dims, qmin, qmax);
  if (q.int_attr("per_channel") != 0) {
    if (dims.empty()) fail("per_channel needs a tensor of rank >= 1");
    axis(q.int_attr("axis"), dims.size(), "axis");
  }
}

// u8 x [B, K] times s8 w [N, K], f32 y [B, N].
inline Outputs linear_int8_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const TensorShape& w = q.input(1, "w");
  if (x.dtype != TDM_U8 || w.dtype != TDM_S8) fail("x must be u8 and w s8, got " + str(x) + ", " + str(w));
  if (x.dims.size() != 2 || w.dims.size() != 2 || x.dims[1] != w.dims[1])
    fail("x " + str(x) + " and w " + str(w) + " must be [B, K] and [N, K]");
  if (const TensorShape* bias = q.optional(2)) require(*bias, {TDM_F32, {w.dims[0]}}, "bias");
  int8_product(q, w.dims[0], x.dims[1], "N");
  return Outputs{{TDM_F32, {x.dims[0], w.dims[0]}}};
}

// The geometry of conv2d, u8 x, s8 w, f32 bias and y.
inline Outputs conv2d_int8_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const TensorShape& w = q.input(1, "w");
  if (x.dtype != TDM_U8 || w.dtype != TDM_S8) fail("x must be u8 and w s8, got " + str(x) + ", " + str(w));
  const Dims y = conv_output(conv_geometry(q), x.dims, w.dims);
  if (const TensorShape* bias = q.optional(2)) require(*bias, {TDM_F32, {w.dims[0]}}, "bias");
  int8_product(q, w.dims[0], w.dims[1] * w.dims[2] * w.dims[3], "K");
  return Outputs{{TDM_F32, y}};
}

// quantize takes its dtype (u8/s8) from the declared output.
inline Outputs quantize_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const TensorShape& y = q.declared(0, "quantized dtype (u8 or s8)");
  if (y.dtype != TDM_U8 && y.dtype != TDM_S8) fail("y must be u8 or s8, got " + str(y));
  const auto [lo, hi] = int_range(y.dtype);
  quant_grid(q, x.dims, lo, hi);
  return Outputs{{y.dtype, x.dims}};
}

inline Outputs dequantize_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const auto [lo, hi] = int_range(x.dtype);
  quant_grid(q, x.dims, lo, hi);
  return Outputs{{TDM_F32, x.dims}};
}

inline Outputs fake_quant_shape(const Query& q) {
  fake_quant_grid(q, q.input(0, "x").dims);
  return same_as(q, 0, "x");
}

// The straight-through estimator's gradient, from x.
inline Outputs fake_quant_grad_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& x = q.input(1, "x");
  if (dy.dims != x.dims) fail("dy " + str(dy) + " and x " + str(x) + " must have one shape");
  fake_quant_grid(q, x.dims);
  return Outputs{dy};
}

}  // namespace detail

inline constexpr RuleEntry kProductRules[] = {
    {"matmul", detail::matmul_shape},
    {"linear", detail::linear_shape},
    {"linear_grad_input", detail::linear_grad_input_shape},
    {"linear_grad_weight", detail::linear_grad_weight_shape},
    {"conv2d", detail::conv2d_shape},
    {"conv2d_grad_input", detail::conv2d_grad_input_shape},
    {"conv2d_grad_weight", detail::conv2d_grad_weight_shape},
    {"max_pool2d", detail::pool2d_shape},
    {"max_pool2d_grad", detail::max_pool2d_grad_shape},
    {"avg_pool2d", detail::pool2d_shape},
    {"avg_pool2d_grad", detail::avg_pool2d_grad_shape},
    {"linear_int8", detail::linear_int8_shape},
    {"conv2d_int8", detail::conv2d_int8_shape},
    {"quantize", detail::quantize_shape},
    {"dequantize", detail::dequantize_shape},
    {"fake_quant", detail::fake_quant_shape},
    {"fake_quant_grad", detail::fake_quant_grad_shape},
};

}  // namespace tandem::shapes

#endif  // TANDEM_OP_SHAPES_PRODUCTS_HPP
