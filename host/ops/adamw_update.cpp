// adamw_update (sdk/ops.md): param, m and v updated in place from the
// gradient (input 1), lr and the 1-based step.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs adamw_shape(const ShapeQuery& q) {
  auto param = input(q, 0, "param");
  if (!param) return param.error();
  for (size_t i = 1; i <= 3; ++i) {
    auto t = input(q, i, i == 1 ? "grad" : i == 2 ? "m" : "v");
    if (!t) return t.error();
    if (t->dims != param->dims)
      return bad("input " + std::to_string(i) + " must have param's shape " + str(*param));
  }
  auto lr = input(q, 4, "lr");
  auto step = input(q, 5, "step");
  if (!lr) return lr.error();
  if (!step) return step.error();
  if (!lr->dims.empty() || !step->dims.empty() || step->dtype != TDM_S32)
    return bad("lr must be a scalar and step an s32 scalar");
  return std::vector<TensorType>{*param, *param, *param};
}

}  // namespace

std::vector<OpInfo> adamw_update_ops() {
  return {
      {.name = "adamw_update", .shape = adamw_shape, .no_grad = "an optimizer update", .gradient_input = 1}};
}

}  // namespace tandem::host::ops
