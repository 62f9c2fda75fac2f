// conv2d_int8 (sdk/ops.md): the geometry of conv2d, u8 x, s8 w, f32 y.
#include "ops/rules.hpp"

namespace tandem::host::ops {

std::vector<OpInfo> conv2d_int8_ops() {
  return {{.name = "conv2d_int8", .no_grad = "INT8 graphs are for inference; training uses fake_quant"}};
}

}  // namespace tandem::host::ops
