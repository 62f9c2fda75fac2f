// `tandem plan`: what a training run would put where, without allocating.
// Memory per device comes from the same planner the executors use, on the
// same per-device graphs, with the layouts and kernel workspaces the
// executors would choose (kernel_prepare allocates no device memory); step
// time from the measured op and copy costs (place/cost_model.hpp).
#include <cstdio>
#include <ostream>

#include "exec/tensor_text.hpp"
#include "ops/shapes.hpp"
#include "place/plan_estimate.hpp"
#include "train/trainer.hpp"
#include "util/format.hpp"
#include "util/logger.hpp"

namespace tandem::host::train {
namespace {

std::string cell(uint64_t bytes) {
  return human_bytes(bytes);
}

}  // namespace

Result<void> Trainer::write_plan(std::ostream& out) const {
  const Graph& g = model_.graph;
  const bool placed = placement_ && !placement_->only_on(device_.id());
  place::CostModel costs(
      devices_.empty() ? std::map<std::string, const DeviceHandle*>{{device_.id(), &device_}} : devices_,
      cost_options());
  // Automatic placement estimated its choice already (against capacities;
  // the table shows the budgets the user gave).
  Result<place::PlanEstimate> estimate = make_error("", TDM_INTERNAL);
  if (automatic_) {
    estimate = automatic_->estimate;
    for (place::DeviceEstimate& d : estimate->devices) {
      auto budget = options_.memory_budgets.find(d.device);
      d.budget = budget == options_.memory_budgets.end() ? 0 : budget->second;
    }
  } else {
    estimate =
        place::estimate_plan(g, placed ? &*placement_ : nullptr, estimate_inputs(&costs, nullptr, false));
    if (auto saved = costs.save(); !saved) log_warning(saved.error().message);
  }
  if (!estimate) return estimate.error();
  std::vector<place::DeviceEstimate>& plans = estimate->devices;

  out << "plan for " << spec_.path << ": batch " << micro_batch_samples_ << " per micro-batch x "
      << micro_batches_ << ", " << plans.size() << (plans.size() == 1 ? " device" : " devices")
      << ", placement " << placement_mode_ << "\n\nlayers\n";
  char line[256];
  for (const model::LayerSpec& layer : spec_.layers) {
    std::string device = device_.id();
    for (size_t i = 0; i < g.node_count(); ++i)
      if (g.node_at(i)->layer == layer.name && !g.node_at(i)->device.empty()) {
        device = g.node_at(i)->device;
        break;
      }
    uint64_t params = 0;
    for (ValueId p : model_.parameters) {
      const Value& v = *g.value(p);
      if (v.name.rfind(layer.name + ".", 0) == 0)
        params += static_cast<uint64_t>(ops::numel(v.type.dims)) * exec::dtype_size(v.type.dtype);
    }
    std::snprintf(line, sizeof line, "  %-20s %-12s %-14s %12s%s\n", layer.name.c_str(), layer.op.c_str(),
                  device.c_str(), params > 0 ? cell(params).c_str() : "-",
                  layer.device ? "  (pinned)"
                  : automatic_ ? "  (auto)"
                               : "");
    out << line;
  }

  out << "\nmemory per device";
  for (const place::DeviceEstimate& p : plans) {
    std::snprintf(line, sizeof line, " %16s", p.device.c_str());
    out << line;
  }
  out << "\n";
  const auto row = [&](const char* name, auto field) {
    std::snprintf(line, sizeof line, "  %-15s", name);
    out << line;
    for (const place::DeviceEstimate& p : plans) {
      std::snprintf(line, sizeof line, " %16s", cell(field(p.memory)).c_str());
      out << line;
    }
    out << "\n";
  };
  row("parameters", [](const exec::MemoryEstimate& e) { return e.parameters; });
  row("gradients", [](const exec::MemoryEstimate& e) { return e.gradients; });
  row("optimizer state", [](const exec::MemoryEstimate& e) { return e.optimizer_state; });
  row("activations", [](const exec::MemoryEstimate& e) { return e.activations; });
  row("workspace", [](const exec::MemoryEstimate& e) { return e.workspace; });
  row("other", [](const exec::MemoryEstimate& e) { return e.other_state + e.inputs + e.allocator_rounding; });
  row("total", [](const exec::MemoryEstimate& e) { return e.total; });
  std::snprintf(line, sizeof line, "  %-15s", "budget");
  out << line;
  for (const place::DeviceEstimate& p : plans) {
    std::snprintf(line, sizeof line, " %16s", p.budget > 0 ? cell(p.budget).c_str() : "none");
    out << line;
  }
  out << "\n";

  const size_t copies = placement_ ? placement_->copies.size() : 0;
  out << "\ncopies per step: " << copies;
  if (copies > 0) out << " (" << human_bytes(placement_->copy_bytes()) << ")";
  out << "\n";
  if (placement_)
    for (const place::Copy& c : placement_->copies) {
      std::snprintf(line, sizeof line, "  %-24s %10s  %s -> %s  (layer '%s' -> '%s', %s)\n", c.value.c_str(),
                    human_bytes(c.bytes).c_str(), c.from.c_str(), c.to.c_str(), c.producer_layer.c_str(),
                    c.consumer_layer.c_str(),
                    c.phase == TDM_PHASE_FORWARD    ? "forward"
                    : c.phase == TDM_PHASE_BACKWARD ? "backward"
                                                    : "optimizer");
      out << line;
    }
  out << "\nestimated step time: " << human_duration_us(estimate->step_us()) << " =";
  for (size_t i = 0; i < plans.size(); ++i)
    out << (i == 0 ? " compute " : " + ") << plans[i].device << " " << human_duration_us(plans[i].compute_us);
  if (placed) out << " + transfers " << human_duration_us(estimate->transfer_us);
  out << "\n  (measured op and copy costs, cached in " << costs.cache_file(device_.id())
      << " and beside it; copies counted as if nothing overlapped)\n";
  if (estimate->over() > 0)
    return make_error(place::does_not_fit(*estimate, fit_context()), TDM_OUT_OF_MEMORY);
  return {};
}

}  // namespace tandem::host::train
