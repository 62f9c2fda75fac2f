// cast (sdk/ops.md): any dtype to any, shape unchanged; the dtype comes from
// the declared output.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs cast_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  auto y = declared(q, 0, "target dtype");
  if (!x) return x.error();
  if (!y) return y.error();
  if (y->dims != x->dims) return bad("y " + str(*y) + " must have x's shape " + dims_str(x->dims));
  return std::vector<TensorType>{{y->dtype, x->dims}};
}

}  // namespace

std::vector<OpInfo> cast_ops() {
  return {{.name = "cast",
           .shape = cast_shape,
           .no_grad = "the host has no gradient rule for cast yet (sdk/ops.md: cast back); mixed precision "
                      "(the amp plugin) converts backward ops itself"}};
}

}  // namespace tandem::host::ops
