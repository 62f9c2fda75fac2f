// The frozen base of LoRA in INT8 ([features.lora] base = "int8"; the QLoRA
// idea at 8 bits). Each linear weight of the base [out, in] is stored as s8
// values "<name>" and f32 row scales "<name>_scale" [out], the layout
// `tandem quantize` writes, and read as the f32 weight q·scale (one
// rounding, bit for bit the `dequantize` op's) made just before the
// projection that reads it: the model holds 1 byte per base weight, and one
// layer's f32 copy at a time. Backward makes the copy again rather than
// keep the forward's (again_for_backward.hpp). The base gets no gradient
// and no optimizer state; only the adapters train.
#pragma once

#include <string>

#include "lowering/model_graph_layers.hpp"

namespace tandem::host::lowering {

// The s8 values of a base weight stored so: its scales are `name + kInt8BaseScale`.
inline constexpr const char* kInt8BaseScale = "_scale";

// After autodiff: each dequantized base weight that backward reads is made
// again there.
Result<void> dequantize_again_for_backward(ModelGraph& model);

namespace detail {

// The weight "<layer>.<suffix>" [out, in] of a linear layer or projection:
// an ordinary parameter, or under an INT8 LoRA base its dequantized s8 form.
Result<ValueId> projection_weight(Context& ctx, const std::string& suffix, Dims dims, Initializer init);

}  // namespace detail

}  // namespace tandem::host::lowering
