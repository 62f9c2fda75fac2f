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

OpInfo entry(std::string_view name, std::string_view first) {
  return {.name = name,
          .section = "rope",
          .inputs = {{first}, {"position_offset", true}},
          .outputs = {{name == "rope" ? "y" : "dx"}},
          .shape = rope_shape};
}

}  // namespace

std::vector<OpInfo> rope_ops() {
  OpInfo forward = entry("rope", "x");
  forward.grad = rope_grad;
  forward.grad_ops = {"rope_grad"};
  OpInfo backward = entry("rope_grad", "dy");
  backward.flags = kGradient;
  backward.no_grad = "a gradient op";
  return {forward, backward};
}

}  // namespace tandem::host::ops
