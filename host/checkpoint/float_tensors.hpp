// Floating-point tensors of a checkpoint in another width. Hugging Face
// checkpoints mostly store bf16 (or f16); a model's master weights are f32.
// Reading keeps the stored width and widens each tensor only as it is
// written where it goes, so a model directory costs its own size in memory
// while it loads, not twice it.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"

namespace tandem::host::checkpoint {

// f16, bf16, f32 or f64.
bool is_float_dtype(tdm_dtype dtype);

// The tensor's values as f32 (exact from f16 and bf16); an error naming
// `file` for a tensor that is not floating point.
Result<std::vector<float>> as_f32(const TensorRecord& t, const std::string& file);

// Every floating-point tensor of `cp` as f32 (for consumers that read the
// bytes themselves: exports).
Result<void> widen_to_f32(Checkpoint& cp, const std::string& file);

}  // namespace tandem::host::checkpoint
