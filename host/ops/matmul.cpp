// matmul (sdk/ops.md "matmul"): batched, numpy-broadcast batch dims.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs matmul_shape(const ShapeQuery& q) {
  auto a = input(q, 0, "a");
  auto b = input(q, 1, "b");
  if (!a) return a.error();
  if (!b) return b.error();
  if (a->dims.size() < 2 || b->dims.size() < 2) return bad("a and b must have rank >= 2");
  if (a->dtype != b->dtype) return bad("a is " + str(*a) + " but b is " + str(*b));
  const bool ta = int_attr(q, "transpose_a", 0) != 0, tb = int_attr(q, "transpose_b", 0) != 0;
  const size_t ra = a->dims.size(), rb = b->dims.size();
  const int64_t m = a->dims[ra - (ta ? 1 : 2)], k = a->dims[ra - (ta ? 2 : 1)];
  const int64_t kb = b->dims[rb - (tb ? 1 : 2)], n = b->dims[rb - (tb ? 2 : 1)];
  if (k != kb) return bad("a " + str(*a) + " and b " + str(*b) + " disagree on K");
  auto batch = broadcast(Dims(a->dims.begin(), a->dims.end() - 2), Dims(b->dims.begin(), b->dims.end() - 2));
  if (!batch) return bad("the batch dims of a " + str(*a) + " and b " + str(*b) + " do not broadcast");
  batch->push_back(m);
  batch->push_back(n);
  return std::vector<TensorType>{{a->dtype, *batch}};
}

// 2·M·N·K per batch element.
double matmul_flops(const Graph& g, const Node& n) {
  const Dims& a = g.value(n.inputs[0])->type.dims;
  const Dims& y = g.value(n.outputs[0])->type.dims;
  const int64_t k = a[a.size() - (int_attr(n.attrs, "transpose_a", 0) != 0 ? 2 : 1)];
  return 2.0 * static_cast<double>(numel(y)) * static_cast<double>(k);
}

}  // namespace

std::vector<OpInfo> matmul_ops() {
  return {{.name = "matmul",
           .shape = matmul_shape,
           .no_grad = "the host has no gradient rule for matmul yet (sdk/ops.md gives it: matmuls of dy with "
                      "the other operand); the model-file layers never emit it",
           .flops = matmul_flops}};
}

}  // namespace tandem::host::ops
