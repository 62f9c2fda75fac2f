// `--weights PATH`: a checkpoint file, or a run directory whose newest
// checkpoint is meant; for the commands that run a trained model (eval,
// generate, export) also a `tandem quantize` directory, its INT8 checkpoint.
#pragma once

#include <optional>
#include <string>

#include "checkpoint/safetensors.hpp"
#include "lowering/int8_plan.hpp"
#include "util/result.hpp"

namespace tandem::cli {

struct Weights {
  std::string path;  // the checkpoint file read
  host::checkpoint::Checkpoint checkpoint;
};

// Errors name the directory without checkpoints or the unreadable file.
// A Hugging Face directory's bf16 and f16 weights stay so unless
// `as_f32` (for commands that read the values themselves: export, quantize).
host::Result<Weights> read_weights(const std::string& file_or_run_dir, bool as_f32 = false);

// A trained model's weights, and its INT8 plan when the checkpoint is INT8
// (calibration.json beside it).
struct ModelWeights : Weights {
  std::optional<host::lowering::Int8Plan> int8;
};
host::Result<ModelWeights> read_model_weights(const std::string& given, bool as_f32 = false);

}  // namespace tandem::cli
