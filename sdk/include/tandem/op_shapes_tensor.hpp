// Tandem SDK — the shape rules of the activations, softmax, elementwise,
// reduce, layout (tensor), cast and optimizer ops (tandem/op_shapes.hpp).
// Header-only, standard library only.
//
// The activation section has one rule for all its ops (kTensorSectionRules),
// so an activation added to the catalog needs none here: a forward op's y
// has x's shape, a gradient op's dx the shape of both its operands.
#ifndef TANDEM_OP_SHAPES_TENSOR_HPP
#define TANDEM_OP_SHAPES_TENSOR_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tandem/op_shape_query.hpp"

namespace tandem::shapes {
namespace detail {

// --- activation: elementwise, y has x's shape --------------------------------

inline Outputs activation_forward_shape(const Query& q) {
  return same_as(q, 0, "x");
}

// dx has the shape of both operands, (dy, x) or (dy, y).
inline Outputs activation_grad_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& other = q.input(1, "x or y");
  if (dy.dims != other.dims || dy.dtype != other.dtype)
    fail("dy " + str(dy) + " and " + str(other) + " must have one shape and dtype");
  return Outputs{dy};
}

// Every op of the catalog's "activation" section.
inline Outputs activation_shape(const Query& q) {
  return q.op().is(TDM_OP_GRADIENT) ? activation_grad_shape(q) : activation_forward_shape(q);
}

// --- softmax, log_softmax and their gradients: along `axis` -------------------

inline Outputs softmax_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  axis(q.int_attr("axis"), x.dims.size(), "axis");  // in range
  return Outputs{x};
}

// The gradients take y.
inline Outputs softmax_grad_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& y = q.input(1, "y");
  if (dy.dims != y.dims) fail("dy " + str(dy) + " and y " + str(y) + " must have one shape");
  axis(q.int_attr("axis"), dy.dims.size(), "axis");  // in range
  return Outputs{dy};
}

// --- add, sub, mul, scale: numpy broadcasting of a and b, one dtype -----------

inline Outputs elementwise_shape(const Query& q) {
  const TensorShape& a = q.input(0, "a");
  const TensorShape& b = q.input(1, "b");
  if (a.dtype != b.dtype) fail("a " + str(a) + " and b " + str(b) + " must have one dtype");
  const std::optional<Dims> y = broadcast(a.dims, b.dims);
  if (!y) fail("a " + str(a) + " and b " + str(b) + " do not broadcast");
  return Outputs{{a.dtype, *y}};
}

inline Outputs scale_shape(const Query& q) {
  return same_as(q, 0, "x");
}

// --- reduce_sum, reduce_mean: over `axes` ([] = every dim) ---------------------

inline Outputs reduce_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const std::vector<int64_t> axes = q.ints_attr("axes");
  const bool keep = q.int_attr("keepdims") != 0;
  std::vector<bool> reduced(x.dims.size(), axes.empty());
  for (int64_t a : axes) {
    const size_t k = axis(a, x.dims.size(), "axis");
    if (reduced[k]) fail("axis " + std::to_string(a) + " is listed twice");
    reduced[k] = true;
  }
  Dims y;
  for (size_t i = 0; i < x.dims.size(); ++i) {
    if (!reduced[i])
      y.push_back(x.dims[i]);
    else if (keep)
      y.push_back(1);
  }
  return Outputs{{x.dtype, y}};
}

// --- reshape, transpose, concat, copy, fill: layout ops in any dtype ----------

// reshape takes its shape from the declared output.
inline Outputs reshape_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const TensorShape& y = q.declared(0, "new shape");
  if (numel(y.dims) != numel(x.dims))
    fail("x " + str(x) + " has " + std::to_string(numel(x.dims)) + " elements, y " + str(y) + " " +
         std::to_string(numel(y.dims)));
  return Outputs{{x.dtype, y.dims}};
}

// `perm`, or the dims reversed (the catalog's default).
inline Outputs transpose_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const size_t rank = x.dims.size();
  std::vector<int64_t> reversed(rank);
  for (size_t i = 0; i < rank; ++i) reversed[i] = static_cast<int64_t>(rank - 1 - i);
  const std::vector<int64_t> perm = q.ints_attr("perm", reversed);
  if (perm.size() != x.dims.size()) fail("perm must have one entry per dim of x " + str(x));
  std::vector<bool> seen(perm.size(), false);
  Dims y;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[size_t(p)]) fail("perm is not a permutation");
    seen[size_t(p)] = true;
    y.push_back(x.dims[size_t(p)]);
  }
  return Outputs{{x.dtype, y}};
}

inline Outputs concat_shape(const Query& q) {
  if (q.n_inputs() == 0) fail("needs at least one input");
  const TensorShape& first = q.input(0, "x0");
  if (first.dims.empty()) fail("inputs must have rank >= 1");
  const size_t k = axis(q.int_attr("axis"), first.dims.size(), "axis");
  Dims y = first.dims;
  for (size_t i = 1; i < q.n_inputs(); ++i) {
    const TensorShape& x = q.input(i, "x");
    Dims other = x.dims;
    if (x.dtype != first.dtype || other.size() != y.size())
      fail("input " + std::to_string(i) + " " + str(x) + " does not match input 0 " + str(first));
    other[k] = y[k];
    if (other != y)
      fail("input " + std::to_string(i) + " " + str(x) + " differs from input 0 outside the axis");
    y[k] += x.dims[k];
  }
  return Outputs{{first.dtype, y}};
}

inline Outputs copy_shape(const Query& q) {
  return same_as(q, 0, "x");
}

// fill takes its shape and dtype from the declared output.
inline Outputs fill_shape(const Query& q) {
  const TensorShape& y = q.declared(0, "shape and dtype");
  const TensorShape* like = q.optional(0);
  if (like != nullptr && (like->dtype != y.dtype || like->dims != y.dims))
    fail("like " + str(*like) + " must be y's shape and dtype " + str(y));
  return Outputs{y};
}

// --- cast: any dtype to any, shape unchanged, dtype from the declared output --

inline Outputs cast_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const TensorShape& y = q.declared(0, "target dtype");
  if (y.dims != x.dims) fail("y " + str(y) + " must have x's shape " + dims_str(x.dims));
  return Outputs{{y.dtype, x.dims}};
}

// --- sgd_update, adamw_update: the state updated in place ---------------------

// The parameter, and the momentum buffer when momentum is on.
inline Outputs sgd_update_shape(const Query& q) {
  const TensorShape& param = q.input(0, "param");
  const TensorShape& grad = q.input(1, "grad");
  const TensorShape& lr = q.input(2, "lr");
  if (grad.dims != param.dims) fail("grad " + str(grad) + " must have param's shape " + str(param));
  if (!lr.dims.empty()) fail("lr " + str(lr) + " must be a scalar");
  Outputs out = {param};
  if (const TensorShape* momentum = q.optional(3)) {
    if (momentum->dims != param.dims) fail("momentum_buf must have param's shape");
    out.push_back(param);
  }
  const double momentum = q.float_attr("momentum");
  if ((momentum != 0.0) != q.present(3))
    fail("momentum_buf (input 3) must be present exactly when momentum != 0; momentum = " +
         std::to_string(momentum));
  if (q.int_attr("nesterov") != 0 && (momentum <= 0.0 || q.float_attr("dampening") != 0.0))
    fail("nesterov needs momentum > 0 and dampening = 0");
  return out;
}

// param, m and v, from the gradient, lr and the 1-based step.
inline Outputs adamw_update_shape(const Query& q) {
  const TensorShape& param = q.input(0, "param");
  for (size_t i = 1; i <= 3; ++i) {
    const TensorShape& t = q.input(i, i == 1 ? "grad" : i == 2 ? "m" : "v");
    if (t.dims != param.dims) fail("input " + std::to_string(i) + " must have param's shape " + str(param));
  }
  const TensorShape& lr = q.input(4, "lr");
  const TensorShape& step = q.input(5, "step");
  if (!lr.dims.empty() || !step.dims.empty() || step.dtype != TDM_S32)
    fail("lr must be a scalar and step an s32 scalar");
  return Outputs{param, param, param};
}

}  // namespace detail

// The rules of single ops, by op name.
inline constexpr RuleEntry kTensorRules[] = {
    {"softmax", detail::softmax_shape},
    {"log_softmax", detail::softmax_shape},
    {"softmax_grad", detail::softmax_grad_shape},
    {"log_softmax_grad", detail::softmax_grad_shape},
    {"add", detail::elementwise_shape},
    {"sub", detail::elementwise_shape},
    {"mul", detail::elementwise_shape},
    {"scale", detail::scale_shape},
    {"reduce_sum", detail::reduce_shape},
    {"reduce_mean", detail::reduce_shape},
    {"reshape", detail::reshape_shape},
    {"transpose", detail::transpose_shape},
    {"concat", detail::concat_shape},
    {"copy", detail::copy_shape},
    {"fill", detail::fill_shape},
    {"cast", detail::cast_shape},
    {"sgd_update", detail::sgd_update_shape},
    {"adamw_update", detail::adamw_update_shape},
};

// The rules of whole catalog sections, by section name (RuleEntry::op holds
// the section): every op of the section without a rule of its own.
inline constexpr RuleEntry kTensorSectionRules[] = {
    {"activation", detail::activation_shape},
};

}  // namespace tandem::shapes

#endif  // TANDEM_OP_SHAPES_TENSOR_HPP
