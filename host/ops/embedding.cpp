// embedding, embedding_grad (sdk/ops.md): table [V, D], s32 indices [...],
// y [..., D]; the gradient's V comes from its declared output.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

Outputs embedding_shape(const ShapeQuery& q) {
  auto table = input(q, 0, "table");
  auto indices = input(q, 1, "indices");
  if (!table) return table.error();
  if (!indices) return indices.error();
  if (table->dims.size() != 2) return bad("table " + str(*table) + " must be [V, D]");
  if (indices->dtype != TDM_S32) return bad("indices " + str(*indices) + " must be s32");
  Dims y = indices->dims;
  y.push_back(table->dims[1]);
  return std::vector<TensorType>{{table->dtype, y}};
}

Outputs grad_shape(const ShapeQuery& q) {
  auto dy = input(q, 0, "dy");
  auto indices = input(q, 1, "indices");
  auto dtable = declared(q, 0, "vocabulary size V");
  if (!dy) return dy.error();
  if (!indices) return indices.error();
  if (!dtable) return dtable.error();
  Dims expected = indices->dims;
  expected.push_back(dtable->dims.size() == 2 ? dtable->dims[1] : -1);
  if (dtable->dims.size() != 2 || dy->dims != expected)
    return bad("dy " + str(*dy) + " must be [..indices.., D] for dtable " + str(*dtable));
  return std::vector<TensorType>{{dy->dtype, dtable->dims}};
}

Result<void> embedding_grad(GradContext& g) {
  return g.grad_to_input0("embedding_grad", {g.dy(), g.in(1)}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> embedding_ops() {
  return {{.name = "embedding", .shape = embedding_shape, .grad = embedding_grad},
          {.name = "embedding_grad", .shape = grad_shape, .no_grad = "a gradient op"}};
}

}  // namespace tandem::host::ops
