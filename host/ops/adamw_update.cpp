// adamw_update (sdk/ops.md): param, m and v updated in place from the
// gradient (input 1), lr and the 1-based step.
#include "ops/rules.hpp"

namespace tandem::host::ops {

std::vector<OpInfo> adamw_update_ops() {
  return {{.name = "adamw_update", .no_grad = "an optimizer update", .gradient_input = 1}};
}

}  // namespace tandem::host::ops
