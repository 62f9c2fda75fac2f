// layer_norm, layer_norm_grad (sdk/ops.md): over the last dim D; mean and
// rstd are f32 [...] (f64 in f64) whatever x's dtype.
#include "ops/rules.hpp"

namespace tandem::host::ops {

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
  return {{.name = "layer_norm", .grad = layer_norm_grad},
          {.name = "layer_norm_grad", .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
