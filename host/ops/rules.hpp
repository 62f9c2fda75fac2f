// Internal to host/ops: what the op family files share to write their
// entries — the families' list, and helpers for the host-run ops' shape
// rules.
#pragma once

#include <string>
#include <vector>

#include "ops/grad_context.hpp"
#include "ops/op_table.hpp"
#include "ops/shapes.hpp"

namespace tandem::host::ops {

// One function per catalog section (file stem), in catalog order.
std::vector<OpInfo> matmul_ops();
std::vector<OpInfo> linear_ops();
std::vector<OpInfo> conv2d_ops();
std::vector<OpInfo> pooling_ops();
std::vector<OpInfo> activation_ops();
std::vector<OpInfo> softmax_ops();
std::vector<OpInfo> softmax_cross_entropy_ops();
std::vector<OpInfo> layer_norm_ops();
std::vector<OpInfo> batch_norm_ops();
std::vector<OpInfo> embedding_ops();
std::vector<OpInfo> dropout_ops();
std::vector<OpInfo> elementwise_ops();
std::vector<OpInfo> reduce_ops();
std::vector<OpInfo> tensor_ops();
std::vector<OpInfo> cast_ops();
std::vector<OpInfo> sgd_update_ops();
std::vector<OpInfo> adamw_update_ops();
std::vector<OpInfo> quantize_ops();
std::vector<OpInfo> linear_int8_ops();
std::vector<OpInfo> conv2d_int8_ops();
std::vector<OpInfo> fake_quant_ops();
std::vector<OpInfo> rms_norm_ops();
std::vector<OpInfo> rope_ops();
std::vector<OpInfo> attention_ops();
std::vector<OpInfo> host_run_ops();  // comm.*, tandem.copy (host_run.cpp): not catalog ops

namespace rules {

// What the host-run ops' shape rules share (host_run.cpp); a catalog op's
// rule is the SDK's (tandem/op_shapes.hpp).
using Outputs = Result<std::vector<TensorType>>;

// A shape error (TDM_INVALID_ARGUMENT); infer() prefixes the op.
Error bad(const std::string& what);
std::string str(const TensorType& t);  // "f32[2,3]"

// Input i, which must be present.
Result<TensorType> input(const ShapeQuery& q, size_t i, const char* name);
// Declared output j, which the rule needs (its shape or dtype comes from it).
Result<TensorType> declared(const ShapeQuery& q, size_t j, const char* what);
// Outputs equal to input i.
Outputs same_as(const ShapeQuery& q, size_t i, const char* name);

}  // namespace rules
}  // namespace tandem::host::ops

namespace tandem::host::ops {
// linear.cpp, shared with conv2d.cpp: the input and weight (and bias)
// gradients of a layer y = op(x, w, bias) from dz, the gradient at its
// pre-activation output. `input_addend`: grad_input takes x's gradient so
// far as its third input (GradContext::partial).
Result<void> weight_grads(GradContext& g, const std::string& grad_input, const std::string& grad_weight,
                          ValueId dz, std::vector<Attr> attrs, bool input_addend = false);
}  // namespace tandem::host::ops

namespace tandem::host::ops {
// layer_norm.cpp, shared with batch_norm.cpp. `input_addend`: grad_op
// takes x's gradient so far as its sixth input (GradContext::partial).
Result<void> norm_grad(GradContext& g, const std::string& grad_op, bool input_addend = false);
}  // namespace tandem::host::ops
