// embedding, embedding_grad (sdk/ops.md): table [V, D], s32 indices [...],
// y [..., D]; the gradient's V comes from its declared output.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

Result<void> embedding_grad(GradContext& g) {
  return g.grad_to_input0("embedding_grad", {g.dy(), g.in(1)}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> embedding_ops() {
  return {{.name = "embedding", .grad = embedding_grad},
          {.name = "embedding_grad", .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
