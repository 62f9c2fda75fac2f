// `tandem export --format onnx`: a model's evaluation graph as an ONNX model
// (opset 17, written with Debian's libonnx and checked by its checker).
//
// The graph is what `tandem eval` runs, from the input to the logits (the
// loss and its labels are left out): f32, or the INT8 graph of a quantized
// checkpoint (QuantizeLinear, then MatMulInteger or ConvInteger and the f32
// rescale: the catalog's arithmetic, so an ONNX runtime gives the same bits). Its input is named "input" (for
// a language model, the token ids) and takes the samples as the graph does, after the [data] normalisation,
// which the model's metadata records (tandem.normalize_mean, tandem.normalize_std); its output is "logits".
// The batch dimension is symbolic ("batch"). Parameters and state are the
// checkpoint's, as initializers.
#pragma once

#include <string>

#include "checkpoint/safetensors.hpp"
#include "lowering/int8_plan.hpp"
#include "model/model_spec.hpp"
#include "util/result.hpp"

namespace tandem::host::exporting {

struct OnnxSummary {
  size_t nodes = 0;         // ONNX nodes written
  size_t initializers = 0;  // constant tensors, parameters included
  size_t bytes = 0;         // the file's size
};

// Writes `output` atomically. `weights_source` names the checkpoint in
// errors; `int8` is its plan when it is an INT8 checkpoint.
Result<OnnxSummary> export_onnx(const model::ModelSpec& spec, const checkpoint::Checkpoint& weights,
                                const std::string& weights_source, const lowering::Int8Plan* int8,
                                const std::string& output);

}  // namespace tandem::host::exporting
