// linear_int8 (sdk/ops.md): u8 x [B, K] times s8 w [N, K], f32 y [B, N].
#include "ops/rules.hpp"

namespace tandem::host::ops {

std::vector<OpInfo> linear_int8_ops() {
  return {{.name = "linear_int8", .no_grad = "INT8 graphs are for inference; training uses fake_quant"}};
}

}  // namespace tandem::host::ops
