// reduce_sum, reduce_mean (sdk/ops.md): over `axes` ([] = every dim).
#include "ops/rules.hpp"

namespace tandem::host::ops {

std::vector<OpInfo> reduce_ops() {
  const char* why =
      "the host has no gradient rule for reductions yet (sdk/ops.md gives it: broadcast dy back); the "
      "model-file layers only use them in gradients and clipping";
  return {{.name = "reduce_sum", .no_grad = why}, {.name = "reduce_mean", .no_grad = why}};
}

}  // namespace tandem::host::ops
