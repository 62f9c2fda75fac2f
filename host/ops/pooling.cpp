// max_pool2d, avg_pool2d and their gradients (sdk/ops.md).
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

// y [N, C, P, Q] of x [N, C, H, W] under the window attributes.
Result<Dims> pooled(const ShapeQuery& q, const Dims& x) {
  if (x.size() != 4) return bad("x must be rank 4 (NCHW), got " + dims_str(x));
  const std::vector<int64_t> k = pair_attr(q, "kernel", {});
  const std::vector<int64_t> s = pair_attr(q, "stride", k);
  const std::vector<int64_t> p = pair_attr(q, "padding", {0, 0});
  if (k.size() != 2 || s.size() != 2 || p.size() != 2)
    return bad("kernel, stride and padding take 1 or 2 values");
  for (int d = 0; d < 2; ++d)
    if (p[size_t(d)] > k[size_t(d)] / 2) return bad("padding may be at most half the kernel");
  const auto ph = window_out(x[2], k[0], s[0], p[0], 1), pw = window_out(x[3], k[1], s[1], p[1], 1);
  if (!ph || !pw) return bad("the window does not fit the padded input " + dims_str(x));
  return Dims{x[0], x[1], *ph, *pw};
}

Outputs pool_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  if (!x) return x.error();
  auto y = pooled(q, x->dims);
  if (!y) return y.error();
  return std::vector<TensorType>{{x->dtype, *y}};
}

Outputs max_grad_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto x = input(q, 1, "x");
  if (!dy) return dy.error();
  if (!x) return x.error();
  auto y = pooled(q, x->dims);
  if (!y) return y.error();
  if (*y != dy->dims) return bad("dy " + str(*dy) + " is not the pooled shape of x " + str(*x));
  return std::vector<TensorType>{{dy->dtype, x->dims}};
}

// avg_pool2d_grad has no x: dx's shape is the declared output's.
Outputs avg_grad_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto dx = declared(q, 0, "input's shape");
  if (!dy) return dy.error();
  if (!dx) return dx.error();
  auto y = pooled(q, dx->dims);
  if (!y) return y.error();
  if (*y != dy->dims) return bad("dy " + str(*dy) + " is not the pooled shape of dx " + str(*dx));
  return std::vector<TensorType>{{dy->dtype, dx->dims}};
}

Result<void> max_pool_grad(GradContext& g) {
  return g.grad_to_input0("max_pool2d_grad", {g.dy(), g.in(0)}, g.node().attrs);
}

Result<void> avg_pool_grad(GradContext& g) {
  return g.grad_to_input0("avg_pool2d_grad", {g.dy()}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> pooling_ops() {
  return {{.name = "max_pool2d", .shape = pool_shape, .grad = max_pool_grad},
          {.name = "max_pool2d_grad", .shape = max_grad_shape, .no_grad = "a gradient op"},
          {.name = "avg_pool2d", .shape = pool_shape, .grad = avg_pool_grad},
          {.name = "avg_pool2d_grad", .shape = avg_grad_shape, .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
