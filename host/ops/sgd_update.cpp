// sgd_update (sdk/ops.md): the parameter (and momentum buffer, when
// momentum is on) updated in place from its gradient (input 1) and lr.
#include "ops/rules.hpp"

namespace tandem::host::ops {

std::vector<OpInfo> sgd_update_ops() {
  return {{.name = "sgd_update", .no_grad = "an optimizer update", .gradient_input = 1}};
}

}  // namespace tandem::host::ops
