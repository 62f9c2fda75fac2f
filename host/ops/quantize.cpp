// quantize, dequantize (sdk/ops.md): affine INT8 per tensor or per channel;
// quantize takes its dtype (u8/s8) from the declared output.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs quantize_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  auto y = declared(q, 0, "quantized dtype (u8 or s8)");
  if (!x) return x.error();
  if (!y) return y.error();
  if (y->dtype != TDM_U8 && y->dtype != TDM_S8) return bad("y must be u8 or s8, got " + str(*y));
  return std::vector<TensorType>{{y->dtype, x->dims}};
}

Outputs dequantize_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  if (!x) return x.error();
  return std::vector<TensorType>{{TDM_F32, x->dims}};
}

}  // namespace

std::vector<OpInfo> quantize_ops() {
  return {{.name = "quantize",
           .shape = quantize_shape,
           .no_grad = "INT8 graphs are for inference; training uses fake_quant"},
          {.name = "dequantize",
           .shape = dequantize_shape,
           .no_grad = "INT8 graphs are for inference; training uses fake_quant"}};
}

}  // namespace tandem::host::ops
