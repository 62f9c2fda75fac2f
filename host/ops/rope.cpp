// rope, rope_grad (sdk/ops.md): rotary position embedding over the last two
// dims [..., T, D] of x (D even), positions offset by an optional s64
// scalar; the gradient is the inverse rotation.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

Result<void> rope_grad(GradContext& g) {
  return g.grad_to_input0("rope_grad", {g.dy(), g.in(1)}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> rope_ops() {
  return {{.name = "rope", .grad = rope_grad}, {.name = "rope_grad", .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
