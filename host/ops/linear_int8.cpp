// linear_int8 (sdk/ops.md): u8 x [B, K] times s8 w [N, K], f32 y [B, N].
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs linear_int8_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  auto w = input(q, 1, "w");
  if (!x) return x.error();
  if (!w) return w.error();
  if (x->dtype != TDM_U8 || w->dtype != TDM_S8)
    return bad("x must be u8 and w s8, got " + str(*x) + ", " + str(*w));
  if (x->dims.size() != 2 || w->dims.size() != 2 || x->dims[1] != w->dims[1])
    return bad("x " + str(*x) + " and w " + str(*w) + " must be [B, K] and [N, K]");
  return std::vector<TensorType>{{TDM_F32, {x->dims[0], w->dims[0]}}};
}

}  // namespace

std::vector<OpInfo> linear_int8_ops() {
  return {{.name = "linear_int8",
           .shape = linear_int8_shape,
           .no_grad = "INT8 graphs are for inference; training uses fake_quant"}};
}

}  // namespace tandem::host::ops
