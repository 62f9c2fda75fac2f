// linear, linear_grad_input, linear_grad_weight (sdk/ops.md).
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

// The fused activation's gradient op; each takes y (sdk/ops.md "linear").
Result<std::string> activation_grad(const std::string& activation) {
  if (activation == "relu") return std::string("relu_grad");
  if (activation == "tanh") return std::string("tanh_grad");
  if (activation == "sigmoid") return std::string("sigmoid_grad");
  return bad("linear: no gradient for activation '" + activation + "'");
}

Result<void> linear_grad(GradContext& g) {
  ValueId dz = g.dy();
  const std::string a = string_attr(g.node().attrs, "activation", "none");
  if (a != "none") {
    auto op = activation_grad(a);
    if (!op) return op.error();
    auto r = g.emit1(*op, "act_grad", {dz, g.out(0)}, {}, g.type(g.out(0)));
    if (!r) return r.error();
    dz = *r;
  }
  return weight_grads(g, "linear_grad_input", "linear_grad_weight", dz, {}, /*input_addend=*/true);
}

ProductDims linear_product(const Graph& g, const Node& n) {  // x [N, I], w [O, I]
  const Dims& x = g.value(n.inputs[0])->type.dims;
  return {x[0], g.value(n.inputs[1])->type.dims[0], x[1]};
}

ProductDims grad_input_product(const Graph& g, const Node& n) {  // dy [N, O], w [O, I]
  const Dims& dy = g.value(n.inputs[0])->type.dims;
  return {dy[0], g.value(n.inputs[1])->type.dims[1], dy[1]};
}

ProductDims grad_weight_product(const Graph& g, const Node& n) {  // dy [N, O], x [N, I]
  const Dims& dy = g.value(n.inputs[0])->type.dims;
  return {dy[1], g.value(n.inputs[1])->type.dims[1], dy[0]};
}

}  // namespace

// Shared with conv2d: dx = <op>_grad_input(dz, w) when x needs it, then
// dw (and dbias) = <op>_grad_weight(dz, x).
Result<void> weight_grads(GradContext& g, const std::string& grad_input, const std::string& grad_weight,
                          ValueId dz, std::vector<Attr> attrs, bool input_addend) {
  const bool has_bias = g.in(2) != kNoValue;
  if (g.needs(g.in(0))) {
    auto dx = g.emit_gradient_of(g.in(0), input_addend, grad_input, "grad_input", {dz, g.in(1)}, attrs,
                                 {g.type(g.in(0))});
    if (!dx) return dx.error();
  }
  attrs.push_back({"has_bias", int64_t{has_bias}});
  std::vector<TensorType> outs = {g.type(g.in(1))};
  if (has_bias) outs.push_back(g.type(g.in(2)));
  auto dw = g.emit(grad_weight, "grad_weight", {dz, g.in(0)}, attrs, outs);
  if (!dw) return dw.error();
  if (auto r = g.accumulate(g.in(1), (*dw)[0]); !r) return r;
  if (has_bias) return g.accumulate(g.in(2), (*dw)[1]);
  return {};
}

std::vector<OpInfo> linear_ops() {
  return {{.name = "linear",
           .grad = linear_grad,
           .flops = flops_of_product<linear_product>,
           .product = linear_product},
          {.name = "linear_grad_input",
           .no_grad = "a gradient op",
           .flops = flops_of_product<grad_input_product>,
           .product = grad_input_product},
          {.name = "linear_grad_weight",
           .no_grad = "a gradient op",
           .flops = flops_of_product<grad_weight_product>,
           .product = grad_weight_product}};
}

}  // namespace tandem::host::ops
