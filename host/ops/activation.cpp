// relu, leaky_relu, gelu, tanh, sigmoid, silu and their gradients
// (sdk/ops.md): elementwise, y has x's shape. relu, leaky_relu, gelu and silu differentiate
// from x, tanh and sigmoid from y (their derivative is cheapest in terms of
// the output).
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs unary_shape(const ShapeQuery& q) {
  return same_as(q, 0, "x");
}

// dx has the shape of both operands.
Outputs binary_grad_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto other = input(q, 1, "x or y");
  if (!dy) return dy.error();
  if (!other) return other.error();
  if (dy->dims != other->dims || dy->dtype != other->dtype)
    return bad("dy " + str(*dy) + " and " + str(*other) + " must have one shape and dtype");
  return std::vector<TensorType>{*dy};
}

Result<void> relu_grad(GradContext& g) {
  return g.grad_to_input0("relu_grad", {g.dy(), g.in(0)}, g.node().attrs);
}
Result<void> leaky_relu_grad(GradContext& g) {
  return g.grad_to_input0("leaky_relu_grad", {g.dy(), g.in(0)}, g.node().attrs);
}
Result<void> gelu_grad(GradContext& g) {
  return g.grad_to_input0("gelu_grad", {g.dy(), g.in(0)}, g.node().attrs);
}
Result<void> silu_grad(GradContext& g) {
  return g.grad_to_input0("silu_grad", {g.dy(), g.in(0)}, g.node().attrs);
}
Result<void> tanh_grad(GradContext& g) {
  return g.grad_to_input0("tanh_grad", {g.dy(), g.out(0)}, g.node().attrs);
}
Result<void> sigmoid_grad(GradContext& g) {
  return g.grad_to_input0("sigmoid_grad", {g.dy(), g.out(0)}, g.node().attrs);
}

OpInfo forward(std::string_view name, GradFn grad, std::string_view grad_op) {
  return {.name = name,
          .section = "activation",
          .inputs = {{"x"}},
          .outputs = {{"y"}},
          .flags = kElementwise,
          .shape = unary_shape,
          .grad = grad,
          .grad_ops = {grad_op}};
}

OpInfo backward(std::string_view name, std::string_view second) {
  return {.name = name,
          .section = "activation",
          .inputs = {{"dy"}, {second}},
          .outputs = {{"dx"}},
          .flags = kGradient | kElementwise,
          .shape = binary_grad_shape,
          .no_grad = "a gradient op"};
}

}  // namespace

std::vector<OpInfo> activation_ops() {
  return {forward("relu", relu_grad, "relu_grad"),
          forward("leaky_relu", leaky_relu_grad, "leaky_relu_grad"),
          forward("gelu", gelu_grad, "gelu_grad"),
          forward("tanh", tanh_grad, "tanh_grad"),
          forward("sigmoid", sigmoid_grad, "sigmoid_grad"),
          forward("silu", silu_grad, "silu_grad"),
          backward("relu_grad", "x"),
          backward("leaky_relu_grad", "x"),
          backward("gelu_grad", "x"),
          backward("tanh_grad", "y"),
          backward("sigmoid_grad", "y"),
          backward("silu_grad", "x")};
}

}  // namespace tandem::host::ops
