// softmax, log_softmax and their gradients (sdk/ops.md): along `axis`,
// y has x's shape; the gradients take y.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs softmax_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  if (!x) return x.error();
  if (auto a = axis(int_attr(q, "axis", -1), x->dims.size(), "axis"); !a) return a.error();
  return std::vector<TensorType>{*x};
}

Outputs grad_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto y = input(q, 1, "y");
  if (!dy) return dy.error();
  if (!y) return y.error();
  if (dy->dims != y->dims) return bad("dy " + str(*dy) + " and y " + str(*y) + " must have one shape");
  return std::vector<TensorType>{*dy};
}

Result<void> softmax_grad(GradContext& g) {
  return g.grad_to_input0("softmax_grad", {g.dy(), g.out(0)}, g.node().attrs);
}
Result<void> log_softmax_grad(GradContext& g) {
  return g.grad_to_input0("log_softmax_grad", {g.dy(), g.out(0)}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> softmax_ops() {
  const auto backward = [](std::string_view name) {
    return OpInfo{.name = name, .shape = grad_shape, .no_grad = "a gradient op"};
  };
  return {{.name = "softmax", .shape = softmax_shape, .grad = softmax_grad},
          {.name = "log_softmax", .shape = softmax_shape, .grad = log_softmax_grad},
          backward("softmax_grad"),
          backward("log_softmax_grad")};
}

}  // namespace tandem::host::ops
