// Which persistent values a training run streams through its device instead
// of keeping them there (exec/stream_plan.hpp): for each streamed layer, its
// parameters, their gradients, and the optimizer's tensors of each of them
// (moments, a gradient accumulator: every persistent input of its update of
// the parameter's size). Scalars every update shares (learning rate, step)
// stay on the device.
#pragma once

#include <set>
#include <string>

#include "lowering/model_graph.hpp"
#include "model/model_spec.hpp"

namespace tandem::host::program {

// Whether the model file or --stream-params asks to stream layer `layer`
// (a repeated layer's copies, "h.3.fc", answer as their template "fc" in
// block "h" does).
bool layer_streamed(const model::ModelSpec& spec, const std::string& layer, bool all_layers);

// The names of the values streamed when the layers `layer_streamed` picks
// are; empty when none is.
std::set<std::string> streamed_values(const lowering::ModelGraph& model, const model::ModelSpec& spec,
                                      bool all_layers);

}  // namespace tandem::host::program
