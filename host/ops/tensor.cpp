// reshape, transpose, concat, copy, fill (sdk/ops.md): layout ops in any
// dtype. reshape takes its shape, and fill its shape and dtype, from the
// declared output.
#include <numeric>

#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

// transpose's `perm`, or the dims reversed (the catalog's default).
std::vector<int64_t> perm_of(const std::vector<Attr>& attrs, size_t rank) {
  std::vector<int64_t> reversed(rank);
  for (size_t i = 0; i < rank; ++i) reversed[i] = static_cast<int64_t>(rank - 1 - i);
  return ints_attr(attrs, "perm", reversed);
}

Result<void> reshape_grad(GradContext& g) {
  return g.grad_to_input0("reshape", {g.dy()}, {});
}

Result<void> transpose_grad(GradContext& g) {
  const std::vector<int64_t> perm = perm_of(g.node().attrs, g.type(g.in(0)).dims.size());
  std::vector<int64_t> inverse(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inverse[static_cast<size_t>(perm[k])] = static_cast<int64_t>(k);
  return g.grad_to_input0("transpose", {g.dy()}, {{"perm", inverse}});
}

}  // namespace

std::vector<OpInfo> tensor_ops() {
  return {{.name = "reshape", .grad = reshape_grad},
          {.name = "transpose", .grad = transpose_grad},
          {.name = "concat",
           .no_grad = "open in the catalog: v1 has no slice op to write concat's gradient with (sdk/ops.md)"},
          {.name = "copy",
           .no_grad = "the host has no gradient rule for copy yet (sdk/ops.md: copy); the model-file layers "
                      "never emit it"},
          {.name = "fill", .no_grad = "a constant"}};
}

}  // namespace tandem::host::ops
