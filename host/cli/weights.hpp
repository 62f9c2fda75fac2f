// `--weights PATH` of eval and quantize: a checkpoint file, or a run
// directory whose newest checkpoint is meant.
#pragma once

#include <string>

#include "checkpoint/safetensors.hpp"
#include "util/result.hpp"

namespace tandem::cli {

struct Weights {
  std::string path;  // the checkpoint file read
  host::checkpoint::Checkpoint checkpoint;
};

// Errors name the directory without checkpoints or the unreadable file.
host::Result<Weights> read_weights(const std::string& file_or_run_dir);

}  // namespace tandem::cli
