// conv2d_int8 (sdk/ops.md): the geometry of conv2d, u8 x, s8 w, f32 y.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs conv2d_int8_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  auto w = input(q, 1, "w");
  if (!x) return x.error();
  if (!w) return w.error();
  if (x->dtype != TDM_U8 || w->dtype != TDM_S8)
    return bad("x must be u8 and w s8, got " + str(*x) + ", " + str(*w));
  // The geometry is conv2d's: ask its rule with f32 stand-ins.
  ShapeQuery f = q;
  f.inputs[0] = TensorType{TDM_F32, x->dims};
  f.inputs[1] = TensorType{TDM_F32, w->dims};
  if (f.inputs.size() > 2) f.inputs.resize(2);
  auto y = find("conv2d")->shape(f);
  if (!y) return y.error();
  (*y)[0].dtype = TDM_F32;
  return y;
}

}  // namespace

std::vector<OpInfo> conv2d_int8_ops() {
  return {{.name = "conv2d_int8",
           .shape = conv2d_int8_shape,
           .no_grad = "INT8 graphs are for inference; training uses fake_quant"}};
}

}  // namespace tandem::host::ops
