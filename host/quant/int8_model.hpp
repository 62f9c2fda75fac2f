// Loading an INT8 model for `tandem eval`: is a checkpoint INT8, where is
// it (a `tandem quantize` output directory or the file itself), and the
// builder's Int8Plan from calibration.json plus the checkpoint's weight
// scales. Errors name the file and say what to do.
#pragma once

#include <optional>
#include <string>

#include "checkpoint/safetensors.hpp"
#include "lowering/int8_plan.hpp"
#include "util/result.hpp"

namespace tandem::host::quant {

bool is_int8_checkpoint(const checkpoint::Checkpoint& cp);
// For a directory written by `tandem quantize` (it holds calibration.json):
// the INT8 checkpoint in it; nullopt for any other directory.
Result<std::optional<std::string>> int8_checkpoint_in(const std::string& dir);
// `checkpoint_path` locates calibration.json (the file named in its metadata,
// in the same directory).
Result<lowering::Int8Plan> load_int8_plan(const checkpoint::Checkpoint& cp,
                                          const std::string& checkpoint_path);

}  // namespace tandem::host::quant
