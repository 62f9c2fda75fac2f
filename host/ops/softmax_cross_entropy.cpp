// softmax_cross_entropy, softmax_cross_entropy_grad, count_correct
// (sdk/ops.md): logits [N, C], s32 labels [N], a scalar loss (f64 when the
// op runs in f64) or count of rows predicted right.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

Result<void> loss_grad(GradContext& g) {
  return g.grad_to_input0("softmax_cross_entropy_grad", {g.dy(), g.in(0), g.in(1)}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> softmax_cross_entropy_ops() {
  return {{.name = "softmax_cross_entropy", .grad = loss_grad},
          {.name = "softmax_cross_entropy_grad", .no_grad = "a gradient op"},
          {.name = "count_correct", .no_grad = "a count, not differentiable"}};
}

}  // namespace tandem::host::ops
