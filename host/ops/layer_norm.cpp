// layer_norm, layer_norm_grad (sdk/ops.md): over the last dim D; mean and
// rstd are f32 [...] (f64 in f64) whatever x's dtype.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

tdm_dtype stats_dtype(tdm_dtype data) {
  return data == TDM_F64 ? TDM_F64 : TDM_F32;
}

Outputs layer_norm_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  auto gamma = input(q, 1, "gamma");
  auto beta = input(q, 2, "beta");
  if (!x) return x.error();
  if (!gamma) return gamma.error();
  if (!beta) return beta.error();
  if (x->dims.empty()) return bad("x must have rank >= 1");
  const Dims d = {x->dims.back()};
  if (gamma->dims != d || beta->dims != d)
    return bad("gamma " + str(*gamma) + " and beta " + str(*beta) + " must be [" + std::to_string(d[0]) +
               "]");
  const TensorType stats{stats_dtype(x->dtype), Dims(x->dims.begin(), x->dims.end() - 1)};
  return std::vector<TensorType>{*x, stats, stats};
}

Outputs layer_norm_grad_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto x = input(q, 1, "x");
  auto gamma = input(q, 2, "gamma");
  if (!dy) return dy.error();
  if (!x) return x.error();
  if (!gamma) return gamma.error();
  if (dy->dims != x->dims) return bad("dy " + str(*dy) + " and x " + str(*x) + " must have one shape");
  if (auto r = addend_like(q, 5, *x); !r) return r.error();
  return std::vector<TensorType>{*x, *gamma, *gamma};
}

}  // namespace

// Shared with batch_norm.cpp: dx, dgamma, dbeta from (dy, x, gamma, the two
// saved statistics = outputs 1 and 2 of the forward node).
Result<void> norm_grad(GradContext& g, const std::string& grad_op, bool input_addend) {
  auto r = g.emit_gradient_of(g.in(0), input_addend, grad_op, "grad",
                              {g.dy(), g.in(0), g.in(1), g.out(1), g.out(2)}, {},
                              {g.type(g.in(0)), g.type(g.in(1)), g.type(g.in(2))});
  if (!r) return r.error();
  for (size_t i = 1; i < 3; ++i)
    if (auto a = g.accumulate(g.in(i), (*r)[i]); !a) return a;
  return {};
}

namespace {
Result<void> layer_norm_grad(GradContext& g) {
  return norm_grad(g, "layer_norm_grad", /*input_addend=*/true);
}
}  // namespace

std::vector<OpInfo> layer_norm_ops() {
  return {{.name = "layer_norm", .shape = layer_norm_shape, .grad = layer_norm_grad},
          {.name = "layer_norm_grad", .shape = layer_norm_grad_shape, .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
