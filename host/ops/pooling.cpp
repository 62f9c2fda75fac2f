// max_pool2d, avg_pool2d and their gradients (sdk/ops.md).
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

Result<void> max_pool_grad(GradContext& g) {
  return g.grad_to_input0("max_pool2d_grad", {g.dy(), g.in(0)}, g.node().attrs);
}

Result<void> avg_pool_grad(GradContext& g) {
  return g.grad_to_input0("avg_pool2d_grad", {g.dy()}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> pooling_ops() {
  return {{.name = "max_pool2d", .grad = max_pool_grad},
          {.name = "max_pool2d_grad", .no_grad = "a gradient op"},
          {.name = "avg_pool2d", .grad = avg_pool_grad},
          {.name = "avg_pool2d_grad", .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
