// add, sub, mul, scale (sdk/ops.md): numpy broadcasting of a and b, one
// dtype. Their gradients are built from catalog ops, each reduced over the
// operand's broadcast axes (GradContext::accumulate_unbroadcast).
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

Result<void> add_grad(GradContext& g) {
  if (auto r = g.accumulate_unbroadcast(g.in(0), g.dy()); !r) return r;
  return g.accumulate_unbroadcast(g.in(1), g.dy());
}

Result<void> sub_grad(GradContext& g) {
  if (auto r = g.accumulate_unbroadcast(g.in(0), g.dy()); !r) return r;
  if (!g.needs(g.in(1))) return {};
  auto neg = g.emit1("scale", "grad_neg", {g.dy()}, {{"alpha", -1.0}}, g.type(g.dy()));
  if (!neg) return neg.error();
  return g.accumulate_unbroadcast(g.in(1), *neg);
}

Result<void> mul_grad(GradContext& g) {
  for (size_t i = 0; i < 2; ++i) {
    const ValueId self = g.in(i), other = g.in(1 - i);
    if (!g.needs(self)) continue;
    auto d = g.emit1("mul", "grad_mul", {g.dy(), other}, {}, g.type(g.dy()));
    if (!d) return d.error();
    if (auto r = g.accumulate_unbroadcast(self, *d); !r) return r;
  }
  return {};
}

Result<void> scale_grad(GradContext& g) {
  const double alpha = float_attr(g.node().attrs, "alpha", 1.0);
  return g.grad_to_input0("scale", {g.dy()}, {{"alpha", alpha}});
}

// In place when the operand has y's shape (the planner checks the bytes).
// Reused: a residual sum's dead branch, a gradient sum's partial sums.
OpInfo binary(std::string_view name, GradFn grad) {
  return {.name = name, .grad = grad};
}

}  // namespace

std::vector<OpInfo> elementwise_ops() {
  return {binary("add", add_grad),
          binary("sub", sub_grad),
          binary("mul", mul_grad),
          {.name = "scale", .grad = scale_grad}};
}

}  // namespace tandem::host::ops
