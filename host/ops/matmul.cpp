// matmul (sdk/ops.md "matmul"): batched, numpy-broadcast batch dims.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

// M: y's rows over every batch element; N: y's columns; K: the depth.
ProductDims matmul_product(const Graph& g, const Node& n) {
  const Dims& a = g.value(n.inputs[0])->type.dims;
  const Dims& y = g.value(n.outputs[0])->type.dims;
  const int64_t k = a[a.size() - (int_attr(n.attrs, "transpose_a", 0) != 0 ? 2 : 1)];
  const int64_t cols = y.empty() ? 1 : y.back();
  return {cols == 0 ? 0 : numel(y) / cols, cols, k};
}

}  // namespace

std::vector<OpInfo> matmul_ops() {
  return {{.name = "matmul",
           .no_grad = "the host has no gradient rule for matmul yet (sdk/ops.md gives it: matmuls of dy with "
                      "the other operand); the model-file layers never emit it",
           .flops = flops_of_product<matmul_product>,
           .product = matmul_product}};
}

}  // namespace tandem::host::ops
