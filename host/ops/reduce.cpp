// reduce_sum, reduce_mean (sdk/ops.md): over `axes` ([] = every dim).
#include <algorithm>

#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs reduce_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  if (!x) return x.error();
  std::vector<int64_t> axes = ints_attr(q, "axes", {});
  const bool keep = int_attr(q, "keepdims", 0) != 0;
  std::vector<bool> reduced(x->dims.size(), axes.empty());
  for (int64_t a : axes) {
    auto k = axis(a, x->dims.size(), "axis");
    if (!k) return k.error();
    if (reduced[*k]) return bad("axis " + std::to_string(a) + " is listed twice");
    reduced[*k] = true;
  }
  Dims y;
  for (size_t i = 0; i < x->dims.size(); ++i) {
    if (!reduced[i])
      y.push_back(x->dims[i]);
    else if (keep)
      y.push_back(1);
  }
  return std::vector<TensorType>{{x->dtype, y}};
}

}  // namespace

std::vector<OpInfo> reduce_ops() {
  const char* why =
      "the host has no gradient rule for reductions yet (sdk/ops.md gives it: broadcast dy back); the "
      "model-file layers only use them in gradients and clipping";
  return {{.name = "reduce_sum", .shape = reduce_shape, .no_grad = why},
          {.name = "reduce_mean", .shape = reduce_shape, .no_grad = why}};
}

}  // namespace tandem::host::ops
