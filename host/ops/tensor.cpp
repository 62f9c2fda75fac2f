// reshape, transpose, concat, copy, fill (sdk/ops.md): layout ops in any
// dtype. reshape takes its shape, and fill its shape and dtype, from the
// declared output.
#include <numeric>

#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

// transpose's `perm`, or the dims reversed (the catalog's default).
std::vector<int64_t> perm_of(const std::vector<Attr>& attrs, size_t rank) {
  std::vector<int64_t> reversed(rank);
  for (size_t i = 0; i < rank; ++i) reversed[i] = static_cast<int64_t>(rank - 1 - i);
  return ints_attr(attrs, "perm", reversed);
}

Outputs reshape_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  auto y = declared(q, 0, "new shape");
  if (!x) return x.error();
  if (!y) return y.error();
  if (numel(y->dims) != numel(x->dims))
    return bad("x " + str(*x) + " has " + std::to_string(numel(x->dims)) + " elements, y " + str(*y) + " " +
               std::to_string(numel(y->dims)));
  return std::vector<TensorType>{{x->dtype, y->dims}};
}

Outputs transpose_shape(const ShapeQuery& q) {
  auto x = input(q, 0, "x");
  if (!x) return x.error();
  const std::vector<int64_t> perm = perm_of(*q.attrs, x->dims.size());
  if (perm.size() != x->dims.size()) return bad("perm must have one entry per dim of x " + str(*x));
  std::vector<bool> seen(perm.size(), false);
  Dims y;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[size_t(p)])
      return bad("perm is not a permutation");
    seen[size_t(p)] = true;
    y.push_back(x->dims[size_t(p)]);
  }
  return std::vector<TensorType>{{x->dtype, y}};
}

Outputs concat_shape(const ShapeQuery& q) {
  if (q.inputs.empty()) return bad("needs at least one input");
  auto first = input(q, 0, "x0");
  if (!first) return first.error();
  if (first->dims.empty()) return bad("inputs must have rank >= 1");
  auto k = axis(int_attr(q, "axis", 0), first->dims.size(), "axis");
  if (!k) return k.error();
  Dims y = first->dims;
  for (size_t i = 1; i < q.inputs.size(); ++i) {
    auto x = input(q, i, "x");
    if (!x) return x.error();
    Dims other = x->dims;
    if (x->dtype != first->dtype || other.size() != y.size())
      return bad("input " + std::to_string(i) + " " + str(*x) + " does not match input 0 " + str(*first));
    other[*k] = y[*k];
    if (other != y)
      return bad("input " + std::to_string(i) + " " + str(*x) + " differs from input 0 outside the axis");
    y[*k] += x->dims[*k];
  }
  return std::vector<TensorType>{{first->dtype, y}};
}

Outputs copy_shape(const ShapeQuery& q) {
  return same_as(q, 0, "x");
}

Outputs fill_shape(const ShapeQuery& q) {
  auto y = declared(q, 0, "shape and dtype");
  if (!y) return y.error();
  if (present(q, 0) && (q.inputs[0]->dtype != y->dtype || q.inputs[0]->dims != y->dims))
    return bad("like " + str(*q.inputs[0]) + " must be y's shape and dtype " + str(*y));
  return std::vector<TensorType>{*y};
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
  return {{.name = "reshape", .shape = reshape_shape, .grad = reshape_grad},
          {.name = "transpose", .shape = transpose_shape, .grad = transpose_grad},
          {.name = "concat",
           .shape = concat_shape,
           .no_grad = "open in the catalog: v1 has no slice op to write concat's gradient with (sdk/ops.md)"},
          {.name = "copy",
           .shape = copy_shape,
           .no_grad = "the host has no gradient rule for copy yet (sdk/ops.md: copy); the model-file layers "
                      "never emit it"},
          {.name = "fill", .shape = fill_shape, .no_grad = "a constant"}};
}

}  // namespace tandem::host::ops
