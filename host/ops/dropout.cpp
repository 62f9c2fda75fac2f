// dropout, dropout_grad (sdk/ops.md): y and a u8 mask of x's shape; the
// gradient applies the mask (so a recomputed dropout replays its mask).
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs dropout_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  if (!x) return x.error();
  if (present(q, 1) && (q.inputs[1]->dtype != TDM_S64 || !q.inputs[1]->dims.empty()))
    return bad("seed_offset " + str(*q.inputs[1]) + " must be an s64 scalar");
  return std::vector<TensorType>{*x, {TDM_U8, x->dims}};
}

Outputs grad_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto mask = input(q, 1, "mask");
  if (!dy) return dy.error();
  if (!mask) return mask.error();
  if (mask->dtype != TDM_U8 || mask->dims != dy->dims)
    return bad("mask " + str(*mask) + " must be u8 with dy's shape " + dims_str(dy->dims));
  return std::vector<TensorType>{*dy};
}

Result<void> dropout_grad(GradContext& g) {
  const double p = float_attr(g.node().attrs, "p", 0.5);  // the catalog's default
  return g.grad_to_input0("dropout_grad", {g.dy(), g.out(1)}, {{"p", p}});
}

}  // namespace

std::vector<OpInfo> dropout_ops() {
  return {{.name = "dropout", .shape = dropout_shape, .grad = dropout_grad},
          {.name = "dropout_grad", .shape = grad_shape, .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
