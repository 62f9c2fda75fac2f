// softmax_cross_entropy, softmax_cross_entropy_grad, count_correct
// (sdk/ops.md): logits [N, C], s32 labels [N], a scalar loss (f64 when the
// op runs in f64) or count of rows predicted right.
#include "ops/rules.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

tdm_dtype loss_dtype(tdm_dtype data) {
  return data == TDM_F64 ? TDM_F64 : TDM_F32;
}

Result<void> check_operands(const TensorType& logits, const TensorType& labels) {
  if (logits.dims.size() != 2) return bad("logits " + str(logits) + " must be [N, C]");
  if (labels.dtype != TDM_S32 || labels.dims != Dims{logits.dims[0]})
    return bad("labels " + str(labels) + " must be s32[" + std::to_string(logits.dims[0]) + "]");
  return {};
}

Outputs loss_shape(const ShapeQuery& q) {
  auto logits = input(q, 0, "logits");
  auto labels = input(q, 1, "labels");
  if (!logits) return logits.error();
  if (!labels) return labels.error();
  if (auto r = check_operands(*logits, *labels); !r) return r.error();
  return std::vector<TensorType>{{loss_dtype(logits->dtype), {}}};
}

Outputs grad_shape(const ShapeQuery& q) {
  auto dloss = input(q, 0, "dloss");
  auto logits = input(q, 1, "logits");
  auto labels = input(q, 2, "labels");
  if (!dloss) return dloss.error();
  if (!logits) return logits.error();
  if (!labels) return labels.error();
  if (!dloss->dims.empty()) return bad("dloss " + str(*dloss) + " must be a scalar");
  if (auto r = check_operands(*logits, *labels); !r) return r.error();
  return std::vector<TensorType>{*logits};
}

Outputs count_shape(const ShapeQuery& q) {
  auto logits = input(q, 0, "logits");
  auto labels = input(q, 1, "labels");
  if (!logits) return logits.error();
  if (!labels) return labels.error();
  if (auto r = check_operands(*logits, *labels); !r) return r.error();
  return std::vector<TensorType>{{TDM_F32, {}}};
}

Result<void> loss_grad(GradContext& g) {
  return g.grad_to_input0("softmax_cross_entropy_grad", {g.dy(), g.in(0), g.in(1)}, g.node().attrs);
}

}  // namespace

std::vector<OpInfo> softmax_cross_entropy_ops() {
  return {{.name = "softmax_cross_entropy", .shape = loss_shape, .grad = loss_grad},
          {.name = "softmax_cross_entropy_grad", .shape = grad_shape, .no_grad = "a gradient op"},
          {.name = "count_correct", .shape = count_shape, .no_grad = "a count, not differentiable"}};
}

}  // namespace tandem::host::ops
