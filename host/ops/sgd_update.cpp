// sgd_update (sdk/ops.md): the parameter (and momentum buffer, when
// momentum is on) updated in place from its gradient (input 1) and lr.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs sgd_shape(const ShapeQuery& q) {
  auto param = input(q, 0, "param");
  auto grad = input(q, 1, "grad");
  auto lr = input(q, 2, "lr");
  if (!param) return param.error();
  if (!grad) return grad.error();
  if (!lr) return lr.error();
  if (grad->dims != param->dims) return bad("grad " + str(*grad) + " must have param's shape " + str(*param));
  if (!lr->dims.empty()) return bad("lr " + str(*lr) + " must be a scalar");
  std::vector<TensorType> out = {*param};
  if (present(q, 3)) {
    if (q.inputs[3]->dims != param->dims) return bad("momentum_buf must have param's shape");
    out.push_back(*param);
  }
  return out;
}

}  // namespace

std::vector<OpInfo> sgd_update_ops() {
  return {{.name = "sgd_update", .shape = sgd_shape, .no_grad = "an optimizer update", .gradient_input = 1}};
}

}  // namespace tandem::host::ops
