// Automatic placement: the device of every unpinned
// layer, chosen so that every device stays within its budget and the
// estimated step time is least.
//
// Each layer starts on the device where its ops are fastest (measured,
// cost_model.hpp; a device that cannot run one of its ops is never
// considered for it). If that is over a budget, every cut of the layers in
// model order in two (those before the cut on one device, the rest on
// another) is evaluated, and the fastest that fits, or else the one least
// over, is the start instead. Then single-layer moves are made greedily, each
// evaluated exactly (placement, copies, the executor's memory plan on every
// device, plan_estimate.hpp):
//   - while some device is over its budget, the move that frees the most
//     over-budget bytes per microsecond of step time it costs;
//   - then, within the budgets, any move that shortens the step (a layer
//     joining its neighbours' device to save copies, typically).
// Pinned layers stay where the model file puts them; nodes outside layers
// (the loss, feature passes' nodes) follow their inputs as in placement.hpp.
// Micro-batches that will be pipelined over the devices
// (EstimateInputs::pipelined): step times are the pipeline's (its slowest
// stage, plan_estimate.hpp), and every cut in two is evaluated first, so the
// layers split into balanced stages.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "model/model_spec.hpp"
#include "place/placement.hpp"
#include "place/plan_estimate.hpp"

namespace tandem::host::place {

struct AutoPlacementInputs {
  PlacementOptions placement;           // pins, strictness, optimizer device, default device
  std::vector<std::string> candidates;  // devices an unpinned layer may go to, the default first
  EstimateInputs estimate;              // devices, budgets, host reads; costs must be set
};

struct AutoPlacement {
  std::map<std::string, std::string> layer_devices;  // every unpinned layer
  PlanEstimate estimate;                             // of that assignment
  bool fits = false;                                 // every device within its budget
  size_t evaluated = 0;                              // assignments evaluated exactly
};

// `graph`: the training graph before placement (not modified). When nothing
// fits, the assignment closest to fitting (least bytes over) with fits = false.
Result<AutoPlacement> place_automatically(const Graph& graph, const model::ModelSpec& spec,
                                          const AutoPlacementInputs& in);

}  // namespace tandem::host::place
