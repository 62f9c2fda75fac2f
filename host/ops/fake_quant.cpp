// fake_quant, fake_quant_grad (sdk/ops.md): quantization-aware training;
// the gradient is the straight-through estimator, from x.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

Result<void> fake_quant_grad(GradContext& g) {
  return g.grad_to_input0("fake_quant_grad", {g.dy(), g.in(0)}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> fake_quant_ops() {
  return {{.name = "fake_quant", .grad = fake_quant_grad},
          {.name = "fake_quant_grad", .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
