// matmul (sdk/ops.md "matmul"): batched, numpy-broadcast batch dims.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

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
           .no_grad = "the host has no gradient rule for matmul yet (sdk/ops.md gives it: matmuls of dy with "
                      "the other operand); the model-file layers never emit it",
           .flops = matmul_flops}};
}

}  // namespace tandem::host::ops
