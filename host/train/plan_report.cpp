// `tandem plan`: what a training run would put where, without allocating.
// Memory per device comes from the same planner the executors use, on the
// same per-device graphs, with the kernels' workspace asked from the
// backends (prepare allocates no device memory).
#include <cstdio>
#include <ostream>

#include "build/shapes.hpp"
#include "exec/collectives.hpp"
#include "exec/kernel_binding.hpp"
#include "exec/planner.hpp"
#include "exec/tensor_text.hpp"
#include "place/split.hpp"
#include "train/trainer.hpp"
#include "util/format.hpp"

namespace tandem::host::train {
namespace {

struct DevicePlan {
  std::string device;
  exec::MemoryEstimate memory;
  uint64_t budget = 0;
};

Result<exec::MemoryEstimate> plan_on(const DeviceHandle& device, const Graph& graph,
                                     const std::vector<std::string>& keep) {
  std::vector<size_t> workspace;
  for (size_t i = 0; i < graph.node_count(); ++i) {
    const Node& n = *graph.node_at(i);
    if (exec::is_collective_op(n.op)) {
      workspace.push_back(0);
      continue;
    }
    auto spec = exec::op_spec_of(graph, n);
    if (!spec) return spec.error();
    auto kernel = exec::KernelBinding::prepare(device, *spec);
    if (!kernel) return kernel.error();
    workspace.push_back(kernel->workspace_bytes());
  }
  std::set<ValueId> outputs;
  for (const std::string& name : keep)
    if (const Value* v = graph.value_by_name(name)) outputs.insert(v->id);
  auto plan = exec::make_plan(graph, workspace, outputs);
  if (!plan) return plan.error();
  return plan->estimate;
}

std::string cell(uint64_t bytes) {
  return human_bytes(bytes);
}

}  // namespace

Result<void> Trainer::write_plan(std::ostream& out) const {
  const Graph& g = model_.graph;
  const std::vector<std::string> host_reads = {"loss", g.value(model_.logits)->name};
  std::vector<DevicePlan> plans;
  const auto budget = [&](const std::string& id) {
    auto it = options_.memory_budgets.find(id);
    return it == options_.memory_budgets.end() ? uint64_t{0} : it->second;
  };
  if (placement_ && placement_->devices.size() > 1) {
    auto split = place::split_by_device(g, *placement_);
    if (!split) return split.error();
    for (const place::DeviceGraph& d : split->devices) {
      std::vector<std::string> keep = host_reads;
      keep.insert(keep.end(), d.exported.begin(), d.exported.end());
      auto memory = plan_on(*devices_.at(d.device), d.graph, keep);
      if (!memory) return memory.error();
      plans.push_back({d.device, *memory, budget(d.device)});
    }
  } else {
    auto memory = plan_on(device_, g, host_reads);
    if (!memory) return memory.error();
    plans.push_back({device_.id(), *memory, budget(device_.id())});
  }

  out << "plan for " << spec_.path << ": batch " << micro_batch_samples_ << " per micro-batch x "
      << micro_batches_ << ", " << plans.size() << (plans.size() == 1 ? " device" : " devices")
      << ", placement " << spec_.train.placement << "\n\nlayers\n";
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
        params += static_cast<uint64_t>(build::numel(v.type.dims)) * exec::dtype_size(v.type.dtype);
    }
    std::snprintf(line, sizeof line, "  %-20s %-12s %-14s %12s%s\n", layer.name.c_str(), layer.op.c_str(),
                  device.c_str(), params > 0 ? cell(params).c_str() : "-", layer.device ? "  (pinned)" : "");
    out << line;
  }

  out << "\nmemory per device";
  for (const DevicePlan& p : plans) {
    std::snprintf(line, sizeof line, " %16s", p.device.c_str());
    out << line;
  }
  out << "\n";
  const auto row = [&](const char* name, auto field) {
    std::snprintf(line, sizeof line, "  %-15s", name);
    out << line;
    for (const DevicePlan& p : plans) {
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
  row("other", [](const exec::MemoryEstimate& e) { return e.other_state + e.inputs; });
  row("total", [](const exec::MemoryEstimate& e) { return e.total; });
  std::snprintf(line, sizeof line, "  %-15s", "budget");
  out << line;
  for (const DevicePlan& p : plans) {
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
  out << "\nstep time: not estimated (the calibrated cost model of automatic placement is not implemented "
         "yet)\n";

  std::string over;
  for (const DevicePlan& p : plans)
    if (p.budget > 0 && p.memory.total > p.budget)
      over += (over.empty() ? "" : "; ") + p.device + " needs " + human_bytes(p.memory.total) +
              ", over its budget of " + human_bytes(p.budget) + " by " +
              human_bytes(p.memory.total - p.budget);
  if (!over.empty())
    return make_error(
        spec_.path + " does not fit: " + over +
            ". To fit: pin some layers to another device (`device = \"...\"` on the layer), split "
            "each batch with [features.grad_accum] micro_batch, recompute activations with "
            "[features.checkpointing], or raise --memory-budget",
        TDM_OUT_OF_MEMORY);
  return {};
}

}  // namespace tandem::host::train
