// Which persistent values a training run may stream through its device
// instead of keeping them there (exec/stream_plan.hpp): per layer with
// parameters, its parameters, their gradients, and the optimizer's tensors
// of each (moments, a gradient accumulator: every persistent input of its
// update of the parameter's size). Scalars every update shares (learning
// rate, step) stay on the device.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "lowering/model_graph.hpp"
#include "model/model_spec.hpp"

namespace tandem::host::program {

struct StreamableLayer {
  std::set<std::string> values;  // what streaming it moves to host memory
  uint64_t bytes = 0;            // their size
  bool forced = false;           // the model file says `stream = true`
};

// Every layer with parameters whose `stream` in the model file is not
// false, in model order. A parameter belongs to the layer of the node that
// reads it first (a tied weight: its owner's).
// `resident`: values that stay on the device whatever their layer (the
// gradients a data-parallel run all-reduces in device memory).
std::vector<StreamableLayer> streamable_layers(const lowering::ModelGraph& model,
                                               const model::ModelSpec& spec,
                                               const std::set<ValueId>& resident = {});

// The values of `layers` together.
std::set<std::string> values_of(const std::vector<StreamableLayer>& layers);

}  // namespace tandem::host::program
