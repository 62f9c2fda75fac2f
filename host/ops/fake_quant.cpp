// fake_quant, fake_quant_grad (sdk/ops.md): quantization-aware training;
// the gradient is the straight-through estimator, from x.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs fake_quant_shape(const ShapeQuery& q) {
  return same_as(q, 0, "x");
}

Outputs grad_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto x = input(q, 1, "x");
  if (!dy) return dy.error();
  if (!x) return x.error();
  if (dy->dims != x->dims) return bad("dy " + str(*dy) + " and x " + str(*x) + " must have one shape");
  return std::vector<TensorType>{*dy};
}

Result<void> fake_quant_grad(GradContext& g) {
  return g.grad_to_input0("fake_quant_grad", {g.dy(), g.in(0)}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> fake_quant_ops() {
  return {{.name = "fake_quant", .shape = fake_quant_shape, .grad = fake_quant_grad},
          {.name = "fake_quant_grad", .shape = grad_shape, .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
