// The LoRA adapters of a run ([features.lora], lowering/lora.hpp) on their
// way out: merged into the base weights (`export --format hf` of a LoRA
// model: W + (alpha/rank)·B·A, the adapters gone), or alone as a PEFT
// adapter directory (`export --format peft`: adapter_model.safetensors
// under PEFT's names, adapter_config.json) that `PeftModel.from_pretrained`
// loads over the Hugging Face base the model was imported from.
#pragma once

#include <string>

#include "checkpoint/safetensors.hpp"
#include "model/model_spec.hpp"
#include "util/result.hpp"

namespace tandem::host::exporting {

// `weights` with every "<target>.lora_A"/".lora_B" pair folded into
// "<target>.weight".
Result<checkpoint::Checkpoint> merged_lora(const checkpoint::Checkpoint& weights, const model::LoraSpec& lora,
                                           const std::string& weights_path);

// Returns the number of adapter tensors written.
Result<size_t> export_peft(const checkpoint::Checkpoint& weights, const std::string& weights_path,
                           const model::LoraSpec& lora, const std::string& hf_dir,
                           const std::string& output_dir);

}  // namespace tandem::host::exporting
