// batch_norm_train, batch_norm_inference, batch_norm_grad (sdk/ops.md):
// per channel (dim 1) of x [N, C, ...]; training updates the running
// statistics in place (out 3 = in 3, out 4 = in 4).
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

// x and the [C] tensors in slots first..last.
Result<TensorType> per_channel(const ShapeQuery& q, size_t first, size_t last) {
  auto x = input(q, 0, "x");
  if (!x) return x.error();
  if (x->dims.size() < 2) return bad("x " + str(*x) + " must be [N, C, ...]");
  const Dims c = {x->dims[1]};
  for (size_t i = first; i <= last; ++i) {
    auto t = input(q, i, "per-channel tensor");
    if (!t) return t.error();
    if (t->dims != c)
      return bad("input " + std::to_string(i) + " " + str(*t) + " must be [" + std::to_string(c[0]) + "]");
  }
  return *x;
}

Outputs train_shape(const ShapeQuery& q) {
  auto x = per_channel(q, 1, 4);
  if (!x) return x.error();
  const TensorType c{x->dtype, {x->dims[1]}};
  return std::vector<TensorType>{*x, c, c, c, c};
}

Outputs inference_shape(const ShapeQuery& q) {
  auto x = per_channel(q, 1, 4);
  if (!x) return x.error();
  return std::vector<TensorType>{*x};
}

Outputs grad_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto x = input(q, 1, "x");
  auto gamma = input(q, 2, "gamma");
  if (!dy) return dy.error();
  if (!x) return x.error();
  if (!gamma) return gamma.error();
  if (dy->dims != x->dims) return bad("dy " + str(*dy) + " and x " + str(*x) + " must have one shape");
  return std::vector<TensorType>{*x, *gamma, *gamma};
}

Result<void> train_grad(GradContext& g) {
  return norm_grad(g, "batch_norm_grad");
}

}  // namespace

std::vector<OpInfo> batch_norm_ops() {
  return {{.name = "batch_norm_train", .shape = train_shape, .grad = train_grad},
          {.name = "batch_norm_inference",
           .shape = inference_shape,
           .no_grad = "evaluation only: training uses batch_norm_train"},
          {.name = "batch_norm_grad", .shape = grad_shape, .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
