// cast (sdk/ops.md): any dtype to any, shape unchanged; the dtype comes from
// the declared output.
#include "ops/rules.hpp"

namespace tandem::host::ops {

std::vector<OpInfo> cast_ops() {
  return {{.name = "cast",
           .no_grad = "the host has no gradient rule for cast yet (sdk/ops.md: cast back); mixed precision "
                      "(the amp plugin) converts backward ops itself"}};
}

}  // namespace tandem::host::ops
