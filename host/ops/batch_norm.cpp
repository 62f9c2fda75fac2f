// batch_norm_train, batch_norm_inference, batch_norm_grad (sdk/ops.md):
// per channel (dim 1) of x [N, C, ...]; training updates the running
// statistics in place (out 3 = in 3, out 4 = in 4).
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

Result<void> train_grad(GradContext& g) {
  return norm_grad(g, "batch_norm_grad");
}

}  // namespace

std::vector<OpInfo> batch_norm_ops() {
  return {{.name = "batch_norm_train", .grad = train_grad},
          {.name = "batch_norm_inference", .no_grad = "evaluation only: training uses batch_norm_train"},
          {.name = "batch_norm_grad", .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
