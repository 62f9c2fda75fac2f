// `tandem export --format safetensors`: a model's weights for PyTorch — the
// tensors its evaluation reads (parameters and running statistics), named
// and laid out as PyTorch's state_dict has them for a module whose
// submodules carry the layers' names (checkpoint/torch_names.hpp), with a
// batch_norm layer's num_batches_tracked. Metadata "format": "pt", as
// safetensors' PyTorch loader expects. `tandem train --init-from` reads such
// a file back (weights only).
#pragma once

#include <string>

#include "checkpoint/safetensors.hpp"
#include "model/model_spec.hpp"
#include "util/result.hpp"

namespace tandem::host::exporting {

// Writes `output` atomically; returns the number of tensors written.
Result<size_t> export_torch_weights(const model::ModelSpec& spec, const checkpoint::Checkpoint& weights,
                                    const std::string& weights_source, const std::string& output);

}  // namespace tandem::host::exporting
