// The message of a training run that does not fit its devices: by how much
// each device is over, and what would make it fit, with the figures that
// matter for each remedy.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "model/model_spec.hpp"
#include "place/plan_estimate.hpp"

namespace tandem::host::place {

struct FitContext {
  const model::ModelSpec* spec = nullptr;
  int64_t micro_batch_samples = 0;  // the graph's batch
  std::string offload_device;       // a CPU device the optimizer could move to ("" none)
  bool several_devices = false;     // automatic placement had other devices to use
  // What a device's limit is when the user gave it no --memory-budget:
  // "total" (its whole memory), "free" (what it reported free), "held"
  // (what it held when it ran out at run time). Absent: the user's budget.
  std::map<std::string, std::string> limit_kind;
  // One device: what it would need with every layer's parameters, gradients
  // and optimizer state streamed from host memory (--stream-params); absent
  // where streaming does not apply.
  std::optional<uint64_t> streamed_total;
};

// "<model> does not fit: <device> needs X (...) but its budget is Y: over by
// Z. To fit: ..." — for an estimate with over() > 0.
std::string does_not_fit(const PlanEstimate& estimate, const FitContext& context);

// Only the remedies (". To fit: ...") for `device`, `over` bytes too many.
std::string remedies(const DeviceEstimate& device, uint64_t over, const FitContext& context);

}  // namespace tandem::host::place
