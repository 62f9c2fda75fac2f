// Placement: which device runs each node, where each tensor lives, and the
// copies between devices that follow.
//
// A layer pinned with `device = "..."` runs its forward, its backward and
// its parameters' updates on that device; a layer without a pin goes where
// automatic placement chose (PlacementOptions::layer_devices), else to the
// run's default device. With an optimizer device (ZeRO-Offload style), the
// optimizer updates run there and the parameters and optimizer state live
// there: each step the gradients are copied to it and the updated
// parameters copied back where they are used. Nodes that belong to no model layer (the loss,
// nodes feature passes insert, gradient clipping) follow their first input
// (or the first node of their group), so they cause no copy of their own. A tensor lives where it is
// produced; a parameter, its state, and a data input live where they are
// first used. When a node reads a tensor that lives on another device, a
// "tandem.copy" node before it brings the tensor over — one copy per tensor
// and consumer device, shared by every later reader there, never back and
// forth.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "model/model_spec.hpp"
#include "ops/op_table.hpp"
#include "util/result.hpp"

namespace tandem::host::place {

using ops::kDeviceCopy;  // the op of the copies placement inserts

struct PlacementOptions {
  std::string default_device;  // a device id, e.g. "onednn:0"
  // strict: a copy is allowed only between two layers the model file pins
  // itself; any other (hidden) copy is an error naming the two layers.
  // Scalars the host writes (learning rate, step) are copied either way.
  bool strict = false;
  // A pin as written ("cpu", "onednn", "reference:0") to a device id.
  std::function<Result<std::string>(const std::string& pin)> resolve;
  // Devices of unpinned layers, by layer name (automatic placement).
  std::map<std::string, std::string> layer_devices;
  // Where sgd_update/adamw_update run, and the tensors they update live
  // (empty: with their layer).
  std::string optimizer_device;
  // Data parallelism averages the gradients across ranks between backward
  // and the optimizer: a gradient the optimizer phase reads on another
  // device is copied there once that phase begins, after the average, not
  // as backward produces it.
  bool averaged_gradients = false;
  // Where named producer-less tensors live, whatever reads them first (an
  // evaluation graph finds the parameters where training put them).
  std::map<std::string, std::string> homes;
};

struct Copy {
  std::string value;  // the tensor copied
  std::string from, to;
  size_t bytes = 0;
  std::string producer_layer, consumer_layer;
  tdm_phase phase = TDM_PHASE_FORWARD;
};

struct Placement {
  std::vector<std::string>
      devices;               // every device that runs a node or holds a tensor, the default first if so
  std::vector<Copy> copies;  // inserted, once per step each
  std::map<ValueId, std::string> home;  // where every tensor lives
  size_t copy_bytes() const;
  // Everything on `device` alone: a plain single-device run.
  bool only_on(const std::string& device) const { return devices.size() == 1 && devices.front() == device; }
};

// Sets every node's device and inserts the copies. Errors name the layers.
Result<Placement> place_layers(Graph& graph, const model::ModelSpec& spec, const PlacementOptions& options);

}  // namespace tandem::host::place
