// rope, rope_grad (sdk/ops.md): rotary position embedding over the last two
// dims [..., T, D] of x (D even), positions offset by an optional s64
// scalar; the gradient is the inverse rotation.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs rope_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  if (!x) return x.error();
  if (x->dims.size() < 2) return bad("x " + str(*x) + " must be [..., T, D]");
  if (x->dims.back() % 2 != 0) return bad("x " + str(*x) + ": the last dim D must be even");
  if (present(q, 1) && (q.inputs[1]->dtype != TDM_S64 || !q.inputs[1]->dims.empty()))
    return bad("position_offset " + str(*q.inputs[1]) + " must be an s64 scalar");
  return std::vector<TensorType>{*x};
}

Result<void> rope_grad(GradContext& g) {
  return g.grad_to_input0("rope_grad", {g.dy(), g.in(1)}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> rope_ops() {
  return {{.name = "rope", .shape = rope_shape, .grad = rope_grad},
          {.name = "rope_grad", .shape = rope_shape, .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
