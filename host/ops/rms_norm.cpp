// rms_norm, rms_norm_grad (sdk/ops.md): over the last dim D, without
// centring; rstd is f32 [...] (f64 in f64) whatever x's dtype.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs rms_norm_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  auto gamma = input(q, 1, "gamma");
  if (!x) return x.error();
  if (!gamma) return gamma.error();
  if (x->dims.empty()) return bad("x must have rank >= 1");
  if (gamma->dims != Dims{x->dims.back()} || gamma->dtype != x->dtype)
    return bad("gamma " + str(*gamma) + " must be " + str({x->dtype, {x->dims.back()}}));
  const TensorType rstd{x->dtype == TDM_F64 ? TDM_F64 : TDM_F32, Dims(x->dims.begin(), x->dims.end() - 1)};
  return std::vector<TensorType>{*x, rstd};
}

Outputs rms_norm_grad_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto x = input(q, 1, "x");
  auto gamma = input(q, 2, "gamma");
  if (!dy) return dy.error();
  if (!x) return x.error();
  if (!gamma) return gamma.error();
  if (dy->dims != x->dims) return bad("dy " + str(*dy) + " and x " + str(*x) + " must have one shape");
  if (auto r = addend_like(q, 4, *x); !r) return r.error();
  return std::vector<TensorType>{*x, *gamma};
}

// dx and dgamma from (dy, x, gamma, rstd = output 1 of the forward node),
// dx onto x's gradient so far (the residual stream's) when there is one.
Result<void> rms_norm_grad(GradContext& g) {
  auto r = g.emit_gradient_of(g.in(0), /*takes_addend=*/true, "rms_norm_grad", "grad",
                              {g.dy(), g.in(0), g.in(1), g.out(1)}, g.node().attrs,
                              {g.type(g.in(0)), g.type(g.in(1))});
  if (!r) return r.error();
  return g.accumulate(g.in(1), (*r)[1]);
}

}  // namespace

std::vector<OpInfo> rms_norm_ops() {
  return {{.name = "rms_norm", .shape = rms_norm_shape, .grad = rms_norm_grad},
          {.name = "rms_norm_grad", .shape = rms_norm_grad_shape, .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
