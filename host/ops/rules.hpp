// Internal to host/ops: what the op family files share to write their
// entries — the families' list, and helpers for shape rules.
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

using Outputs = Result<std::vector<TensorType>>;

// A shape error (TDM_INVALID_ARGUMENT); infer() prefixes the op.
Error bad(const std::string& what);
std::string str(const TensorType& t);  // "f32[2,3]"

bool present(const ShapeQuery& q, size_t i);
// Input i, which must be present.
Result<TensorType> input(const ShapeQuery& q, size_t i, const char* name);
// Declared output j, which the rule needs (its shape or dtype comes from it).
Result<TensorType> declared(const ShapeQuery& q, size_t j, const char* what);
// Attributes of the query, with defaults.
int64_t int_attr(const ShapeQuery& q, const char* name, int64_t fallback);
std::string string_attr(const ShapeQuery& q, const char* name, const std::string& fallback);
std::vector<int64_t> ints_attr(const ShapeQuery& q, const char* name, std::vector<int64_t> fallback);
// An `ints` attribute for the two spatial dims: one entry is repeated.
std::vector<int64_t> pair_attr(const ShapeQuery& q, const char* name, std::vector<int64_t> fallback);
// A possibly negative axis into [0, rank), or an error naming `what`.
Result<size_t> axis(int64_t axis, size_t rank, const char* what);

// Outputs equal to input i (elementwise ops and most gradients).
Outputs same_as(const ShapeQuery& q, size_t i, const char* name);
// An error unless the optional `addend` input i, when present, has `dx`'s
// type (a gradient op that adds x's gradient so far into dx).
Result<void> addend_like(const ShapeQuery& q, size_t i, const TensorType& dx);
bool is_floating(tdm_dtype dtype);
// The dtype of a product's output j from operands of dtype `operands`: f32
// when the caller declared output j f32 over bf16/f16 operands (ops.md,
// "Wide outputs": the f32 sum is not rounded to the operands' dtype), else
// `operands`.
tdm_dtype product_output_dtype(const ShapeQuery& q, size_t j, tdm_dtype operands);

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
