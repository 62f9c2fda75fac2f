// conv2d, conv2d_grad_input, conv2d_grad_weight (sdk/ops.md).
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

Result<void> conv2d_grad(GradContext& g) {
  return weight_grads(g, "conv2d_grad_input", "conv2d_grad_weight", g.dy(), g.node().attrs);
}

}  // namespace

std::vector<OpInfo> conv2d_ops() {
  return {{.name = "conv2d", .grad = conv2d_grad},
          {.name = "conv2d_grad_input", .no_grad = "a gradient op"},
          {.name = "conv2d_grad_weight", .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
