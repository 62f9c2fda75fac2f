// `tandem export --format hf`: trained weights as a Hugging Face model
// directory that transformers loads unchanged — model.safetensors under the
// family's names and layouts (the inverse of hf_weights.hpp: GPT-2's
// Conv1D weights transposed back, q, k and v packed into c_attn), the
// configuration of the directory the model was imported from (its
// torch_dtype now float32), and its tokenizer and generation files.
//
// The directory is written beside OUTPUT and renamed into place when
// complete: an interrupted export leaves no half-written model behind, and
// an existing OUTPUT is replaced only then.
#pragma once

#include <functional>
#include <string>

#include "checkpoint/safetensors.hpp"
#include "hub/hf_config.hpp"
#include "util/result.hpp"

namespace tandem::host::exporting {

struct HfExport {
  size_t tensors = 0;
  std::vector<std::string> copied;  // the files taken from the source directory
};

// `weights` under Tandem's names (a checkpoint of the model `tandem import`
// made of `source_dir`); `weights_path` names them in errors.
Result<HfExport> export_hf(const checkpoint::Checkpoint& weights, const std::string& weights_path,
                           const std::string& source_dir, const std::string& output_dir);

// The Hugging Face name of the Tandem tensor `tandem` (one of a single
// tensor: GPT-2's q, k and v, packed into c_attn, have none).
Result<std::string> hf_name(const std::string& tandem, const hub::HfConfig& config);

// Fills a fresh directory beside OUTPUT through `fill(staging)` and renames
// it into place (the old OUTPUT, if any, replaced only then); a failure
// leaves OUTPUT as it was.
Result<void> write_directory(const std::string& output_dir,
                             const std::function<Result<void>(const std::string& staging)>& fill);

}  // namespace tandem::host::exporting
