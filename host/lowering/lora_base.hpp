// The frozen base of LoRA stored narrower than f32 ([features.lora] base):
//   "int8" (QLoRA's idea at 8 bits): each linear weight of the base
//          [out, in] as s8 values "<name>" and f32 row scales
//          "<name>_scale" [out], the layout `tandem quantize` writes, read
//          as the f32 weight q·scale (one rounding, bit for bit the
//          `dequantize` op's);
//   "bf16": each such weight in bf16 (as Hugging Face checkpoints ship
//          them), read as its exact f32 value.
// Either form is made just before the projection that reads it, so the
// model holds 1 or 2 bytes per base weight and one layer's f32 copy at a
// time; backward makes the copy again rather than keep the forward's
// (again_for_backward.hpp). The base gets no gradient and no optimizer
// state; only the adapters train.
#pragma once

#include <string>

#include "lowering/model_graph_layers.hpp"

namespace tandem::host::lowering {

// The s8 values of an INT8 base weight: its scales are `name + kInt8BaseScale`.
inline constexpr const char* kInt8BaseScale = "_scale";

// After autodiff: each widened base weight that backward reads is made
// again there.
Result<void> widen_again_for_backward(ModelGraph& model);

namespace detail {

// The weight "<layer>.<suffix>" [out, in] of a linear layer or projection:
// an ordinary parameter, or the f32 form of a narrow LoRA base.
Result<ValueId> projection_weight(Context& ctx, const std::string& suffix, Dims dims, Initializer init);

}  // namespace detail

}  // namespace tandem::host::lowering
