// conv2d, conv2d_grad_input, conv2d_grad_weight (sdk/ops.md).
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

struct Geometry {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};

Geometry geometry(const ShapeQuery& q) {
  return {pair_attr(q, "stride", {1, 1}), pair_attr(q, "padding", {0, 0}), pair_attr(q, "dilation", {1, 1}),
          int_attr(q, "groups", 1)};
}

// y [N, K, P, Q] of x [N, C, H, W] and w [K, C/g, R, S].
Result<Dims> conv_output(const Geometry& geo, const Dims& x, const Dims& w) {
  if (x.size() != 4 || w.size() != 4) return bad("x and w must be rank 4 (NCHW, KCRS)");
  if (geo.stride.size() != 2 || geo.padding.size() != 2 || geo.dilation.size() != 2)
    return bad("stride, padding and dilation take 1 or 2 values");
  if (geo.groups < 1 || x[1] % geo.groups != 0 || w[0] % geo.groups != 0 || w[1] != x[1] / geo.groups)
    return bad("groups = " + std::to_string(geo.groups) + " must divide C = " + std::to_string(x[1]) +
               " and K = " + std::to_string(w[0]) + ", and w must have C/groups channels");
  const auto p = window_out(x[2], w[2], geo.stride[0], geo.padding[0], geo.dilation[0]);
  const auto r = window_out(x[3], w[3], geo.stride[1], geo.padding[1], geo.dilation[1]);
  if (!p || !r) return bad("the filter " + dims_str(w) + " does not fit the padded input " + dims_str(x));
  return Dims{x[0], w[0], *p, *r};
}

Outputs conv2d_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  auto w = input(q, 1, "w");
  if (!x) return x.error();
  if (!w) return w.error();
  auto y = conv_output(geometry(q), x->dims, w->dims);
  if (!y) return y.error();
  if (present(q, 2) && q.inputs[2]->dims != Dims{w->dims[0]})
    return bad("bias " + str(*q.inputs[2]) + " must be [" + std::to_string(w->dims[0]) + "]");
  return std::vector<TensorType>{{x->dtype, *y}};
}

// dx's H and W are not a function of dy's (stride > 1 drops rows): they
// come from the declared output, checked against dy.
Outputs grad_input_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto w = input(q, 1, "w");
  auto dx = declared(q, 0, "input's shape");
  if (!dy) return dy.error();
  if (!w) return w.error();
  if (!dx) return dx.error();
  auto y = conv_output(geometry(q), dx->dims, w->dims);
  if (!y) return y.error();
  if (*y != dy->dims)
    return bad("dy " + str(*dy) + " is not the output of dx " + str(*dx) + " and w " + str(*w));
  return std::vector<TensorType>{{dy->dtype, dx->dims}};
}

Outputs grad_weight_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto x = input(q, 1, "x");
  if (!dy) return dy.error();
  if (!x) return x.error();
  const Geometry geo = geometry(q);
  auto dw = declared(q, 0, "kernel size");
  if (!dw) return dw.error();
  auto y = conv_output(geo, x->dims, dw->dims);
  if (!y) return y.error();
  if (*y != dy->dims)
    return bad("dy " + str(*dy) + " is not the output of x " + str(*x) + " and w " + str(*dw));
  std::vector<TensorType> out = {{dy->dtype, dw->dims}};
  if (int_attr(q, "has_bias", 1) != 0) out.push_back({dy->dtype, {dw->dims[0]}});
  return out;
}

Result<void> conv2d_grad(GradContext& g) {
  return weight_grads(g, "conv2d_grad_input", "conv2d_grad_weight", g.dy(), g.node().attrs);
}

}  // namespace

std::vector<OpInfo> conv2d_ops() {
  return {{.name = "conv2d", .shape = conv2d_shape, .grad = conv2d_grad},
          {.name = "conv2d_grad_input", .shape = grad_input_shape, .no_grad = "a gradient op"},
          {.name = "conv2d_grad_weight", .shape = grad_weight_shape, .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
