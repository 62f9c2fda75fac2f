// A narrow LoRA base (lowering/lora_base.hpp) started from weights wider
// than it (a Hugging Face directory's bf16 or f16 for an INT8 base, a run
// without it in f32): each base weight narrowed as it loads. "bf16" rounds
// to nearest even (exact for weights that were bf16); "int8" quantizes per
// row and symmetric as `tandem quantize` does, into the s8 values and row
// scales the model holds. Weights already narrow (the run's own
// checkpoints, a `tandem quantize` file) load as they are.
#pragma once

#include <string>

#include "checkpoint/safetensors.hpp"
#include "graph/graph.hpp"

namespace tandem::host::train {

// The tensors of `cp` that the graph holds narrower than they are stored,
// narrowed; `source` names `cp` in errors.
Result<checkpoint::Checkpoint> narrowed_bases(const Graph& graph, const checkpoint::Checkpoint& cp,
                                              const std::string& source);

}  // namespace tandem::host::train
