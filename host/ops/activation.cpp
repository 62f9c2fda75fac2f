// The activation section of the catalog (relu, leaky_relu, gelu, tanh,
// sigmoid, silu, ... and their gradients, tandem/op_catalog_entries.hpp):
// elementwise, y has x's shape. Their rules are one rule each, read from
// the catalog, so an activation added there needs nothing here: a forward
// op's gradient is its catalog gradient op over (dy, x) or (dy, y), as that
// op's second operand is named (tanh and sigmoid differentiate from y, their
// derivative is cheapest in terms of the output), with the forward's
// attributes.
#include "ops/rules.hpp"

#include "tandem/op_catalog.hpp"

namespace tandem::host::ops {
namespace {

Result<void> activation_grad(GradContext& g) {
  const catalog::Op& forward = *catalog::find(g.node().op);
  const catalog::Op& backward = *catalog::find(forward.grad_ops.at(0));
  const ValueId second = backward.inputs.at(1).name == "y" ? g.out(0) : g.in(0);
  return g.grad_to_input0(backward.name, {g.dy(), second}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> activation_ops() {
  std::vector<OpInfo> ops;
  for (const catalog::Op& op : catalog::ops()) {
    if (op.section != "activation") continue;
    if (op.is(TDM_OP_GRADIENT))
      ops.push_back({.name = op.name, .no_grad = "a gradient op"});
    else
      ops.push_back({.name = op.name, .grad = activation_grad});
  }
  return ops;
}

}  // namespace tandem::host::ops
