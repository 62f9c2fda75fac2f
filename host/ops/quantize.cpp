// quantize, dequantize (sdk/ops.md): affine INT8 per tensor or per channel;
// quantize takes its dtype (u8/s8) from the declared output.
#include "ops/rules.hpp"

namespace tandem::host::ops {

std::vector<OpInfo> quantize_ops() {
  return {{.name = "quantize", .no_grad = "INT8 graphs are for inference; training uses fake_quant"},
          {.name = "dequantize", .no_grad = "INT8 graphs are for inference; training uses fake_quant"}};
}

}  // namespace tandem::host::ops
