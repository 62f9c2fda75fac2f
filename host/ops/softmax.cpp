// softmax, log_softmax and their gradients (sdk/ops.md): along `axis`,
// y has x's shape; the gradients take y.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

Result<void> softmax_grad(GradContext& g) {
  return g.grad_to_input0("softmax_grad", {g.dy(), g.out(0)}, g.node().attrs);
}
Result<void> log_softmax_grad(GradContext& g) {
  return g.grad_to_input0("log_softmax_grad", {g.dy(), g.out(0)}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> softmax_ops() {
  const auto backward = [](std::string_view name) {
    return OpInfo{.name = name, .no_grad = "a gradient op"};
  };
  return {{.name = "softmax", .grad = softmax_grad},
          {.name = "log_softmax", .grad = log_softmax_grad},
          backward("softmax_grad"),
          backward("log_softmax_grad")};
}

}  // namespace tandem::host::ops
