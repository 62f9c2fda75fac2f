#include "place/placed_executor.hpp"

#include "exec/pipelined_executor.hpp"
#include "exec/tensor_text.hpp"
#include "ops/op_table.hpp"
#include "place/split.hpp"
#include "util/format.hpp"

namespace tandem::host::place {
exec::ExecutorOptions part_options(const DeviceGraph& d, const exec::ExecutorOptions& options) {
  exec::ExecutorOptions sub;
  sub.profile = options.profile;
  sub.numerics = options.numerics;
  for (const std::string& name : options.outputs)
    if (d.graph.value_by_name(name) != nullptr) sub.outputs.push_back(name);
  for (const std::string& name : d.exported)
    if (d.graph.value_by_name(name) != nullptr) sub.outputs.push_back(name);
  for (const auto& [name, pointer] : options.external)
    if (d.graph.value_by_name(name) != nullptr) sub.external[name] = pointer;
  return sub;
}

namespace {

bool has_collectives(const Graph& graph) {
  for (size_t i = 0; i < graph.node_count(); ++i)
    if (ops::is(graph.node_at(i)->op, ops::kCollective)) return true;
  return false;
}

// The device whose executor issues the exchanges with the other ranks (""
// when none does). They run in the schedule's order, the same on every
// rank, only when one executor issues them all.
Result<std::string> device_with_collectives(const SplitGraph& split) {
  std::vector<std::string> holders;
  for (const DeviceGraph& d : split.devices)
    if (has_collectives(d.graph)) holders.push_back(d.device);
  if (holders.size() <= 1) return holders.empty() ? std::string() : holders.front();
  std::string devices;
  for (const std::string& d : holders) devices += (devices.empty() ? "" : " and ") + d;
  return make_error("the exchanges with the other ranks (tensor parallelism, [train] zero) would run on " +
                        devices +
                        ": across several devices of one process they are not supported yet; keep the "
                        "layers on one device per rank (only [train] optimizer_device beside it)",
                    TDM_UNSUPPORTED);
}

struct Composition {
  SplitGraph split;
  std::unique_ptr<exec::ComposedExecutor> executor;
};

Result<Composition> compose(const std::map<std::string, const DeviceHandle*>& devices, const Graph& placed,
                            const Placement& placement, const exec::ExecutorOptions& options,
                            const std::map<std::string, uint64_t>& budgets) {
  auto split = split_by_device(placed, placement);
  if (!split) return split.error();
  auto exchanging = device_with_collectives(*split);
  if (!exchanging) return exchanging.error();
  std::vector<exec::ExecutorPart> parts;
  std::map<std::string, size_t> index;
  for (DeviceGraph& d : split->devices) {
    exec::ExecutorOptions sub = part_options(d, options);
    if (d.device == *exchanging) {
      sub.collectives = options.collectives;
      sub.data_collectives = options.data_collectives;
    }
    if (auto b = budgets.find(d.device); b != budgets.end()) sub.memory_budget = b->second;
    auto device = devices.find(d.device);
    if (device == devices.end())
      return make_error("placement uses " + d.device + ", which this run did not open (internal)",
                        TDM_INTERNAL);
    auto executor = exec::DeviceExecutor::create(*device->second, d.graph, std::move(sub));
    if (!executor) return executor.error();
    index[d.device] = parts.size();
    parts.push_back(exec::ExecutorPart{std::move(*executor), d.device, d.positions, d.local_of});
  }
  std::vector<exec::ExecutorTransfer> transfers;
  for (const Transfer& t : split->transfers) {
    const DeviceGraph& from = split->devices[index.at(t.from)];
    const DeviceGraph& to = split->devices[index.at(t.to)];
    const Value* source = from.graph.value_by_name(t.value);
    const Value* destination = to.graph.value_by_name(t.value + "@" + t.to);
    if (destination == nullptr)
      continue;  // copied but never read (internal: placement only copies for readers)
    if (source == nullptr)
      return make_error("'" + t.value + "' is copied from " + t.from + ", which does not hold it (internal)",
                        TDM_INTERNAL);
    const size_t bytes = exec::tensor_bytes(source->type);
    transfers.push_back({t.position, index.at(t.from), index.at(t.to), source->id, destination->id, bytes});
  }
  std::map<ValueId, std::pair<size_t, ValueId>> owner;
  for (const auto& [value, home] : placement.home) {
    const size_t p = index.at(home);
    if (auto it = split->devices[p].local_of.find(value); it != split->devices[p].local_of.end())
      owner[value] = {p, it->second};
  }
  auto composed =
      exec::Executor::compose(std::move(parts), std::move(transfers), placed.node_count(), std::move(owner));
  return Composition{std::move(*split), std::move(composed)};
}

// Part `part`'s further instances for its micro-batches in flight: bound to
// its first instance's persistent values but those of one micro-batch, each
// within what the device's budget leaves.
Result<std::vector<std::unique_ptr<exec::DeviceExecutor>>> more_instances(
    const exec::ComposedExecutor& composed, const DeviceGraph& graph, const exec::PipelineLayout& layout,
    size_t part, const exec::ExecutorOptions& options, const std::map<std::string, uint64_t>& budgets) {
  std::vector<std::unique_ptr<exec::DeviceExecutor>> instances;
  const size_t stage = layout.stage_of(part);
  if (stage == layout.stage_part.size()) return instances;
  const exec::DeviceExecutor& first = *composed.parts()[part].executor;
  exec::ExecutorOptions sub = part_options(graph, options);
  for (const exec::PersistentBuffer& b : first.plan().persistent)
    if (layout.per_instance[part].count(b.value) == 0) sub.external[b.name] = first.device_pointer(b.value);
  // The budget counts what each instance allocates itself (its plan also
  // lists the shared values, which it does not allocate).
  const auto budget = budgets.find(graph.device);
  uint64_t held = first.allocated_bytes();
  for (size_t j = 1; j < layout.instances(stage); ++j) {
    auto e = exec::DeviceExecutor::create(first.device(), graph.graph, sub);
    if (!e) return e.error();
    held += (*e)->allocated_bytes();
    if (budget != budgets.end() && held > budget->second)
      return make_error(graph.device + ": the activations of micro-batch " + std::to_string(j + 1) +
                            " of the " + std::to_string(layout.instances(stage)) +
                            " this pipeline stage holds at once take it to " + human_bytes(held) +
                            ", over its budget of " + human_bytes(budget->second) +
                            "; raise the budget, or turn the pipeline off ([train] pipeline = false: one "
                            "micro-batch at a time)",
                        TDM_OUT_OF_MEMORY);
    instances.push_back(std::move(*e));
  }
  return instances;
}

}  // namespace

Result<std::unique_ptr<exec::ComposedExecutor>> make_placed_executor(
    const std::map<std::string, const DeviceHandle*>& devices, const Graph& placed,
    const Placement& placement, const exec::ExecutorOptions& options,
    const std::map<std::string, uint64_t>& budgets) {
  auto composition = compose(devices, placed, placement, options, budgets);
  if (!composition) return composition.error();
  return std::move(composition->executor);
}

Result<std::unique_ptr<exec::Executor>> make_pipelined_executor(
    const std::map<std::string, const DeviceHandle*>& devices, const Graph& placed,
    const Placement& placement, const exec::ExecutorOptions& options,
    const std::map<std::string, uint64_t>& budgets, const exec::PipelineRequest& request,
    std::string& why_not) {
  auto composition = compose(devices, placed, placement, options, budgets);
  if (!composition) return composition.error();
  auto layout = exec::plan_pipeline(*composition->executor, request);
  if (!layout) {
    if (layout.error().status != TDM_UNSUPPORTED) return layout.error();
    why_not = layout.error().message;
    return std::unique_ptr<exec::Executor>(std::move(composition->executor));
  }
  std::vector<std::vector<std::unique_ptr<exec::DeviceExecutor>>> instances;
  for (size_t p = 0; p < composition->split.devices.size(); ++p) {
    auto more =
        more_instances(*composition->executor, composition->split.devices[p], *layout, p, options, budgets);
    if (!more) return more.error();
    instances.push_back(std::move(*more));
  }
  return std::unique_ptr<exec::Executor>(std::make_unique<exec::PipelinedExecutor>(
      std::move(composition->executor), std::move(*layout), std::move(instances)));
}

}  // namespace tandem::host::place
