// dropout, dropout_grad (sdk/ops.md): y and a u8 mask of x's shape; the
// gradient applies the mask (so a recomputed dropout replays its mask).
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

Result<void> dropout_grad(GradContext& g) {
  const double p = float_attr(g.node().attrs, "p", 0.5);  // the catalog's default
  return g.grad_to_input0("dropout_grad", {g.dy(), g.out(1)}, {{"p", p}});
}

}  // namespace

std::vector<OpInfo> dropout_ops() {
  return {{.name = "dropout", .grad = dropout_grad}, {.name = "dropout_grad", .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
