// rms_norm, rms_norm_grad (sdk/ops.md): over the last dim D, without
// centring; rstd is f32 [...] (f64 in f64) whatever x's dtype.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

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
  return {{.name = "rms_norm", .grad = rms_norm_grad}, {.name = "rms_norm_grad", .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
