#include "place/placed_executor.hpp"

#include "exec/tensor_text.hpp"
#include "place/split.hpp"

namespace tandem::host::place {

Result<std::unique_ptr<exec::ComposedExecutor>> make_placed_executor(
    const std::map<std::string, const DeviceHandle*>& devices, const Graph& placed,
    const Placement& placement, const exec::ExecutorOptions& options,
    const std::map<std::string, uint64_t>& budgets) {
  if (options.collectives != nullptr)
    return make_error("tensor parallelism across several devices of one process is not supported yet",
                      TDM_UNSUPPORTED);
  if (options.data_collectives != nullptr)
    return make_error(
        "[train] zero across several devices of one process is not supported yet: place the "
        "run on one device per rank, or train with zero = 0",
        TDM_UNSUPPORTED);
  auto split = split_by_device(placed, placement);
  if (!split) return split.error();
  std::vector<exec::ExecutorPart> parts;
  std::map<std::string, size_t> index;
  for (DeviceGraph& d : split->devices) {
    exec::ExecutorOptions sub;
    sub.profile = options.profile;
    sub.numerics = options.numerics;
    for (const std::string& name : options.outputs)
      if (d.graph.value_by_name(name) != nullptr) sub.outputs.push_back(name);
    for (const std::string& name : d.exported)
      if (d.graph.value_by_name(name) != nullptr) sub.outputs.push_back(name);
    for (const auto& [name, pointer] : options.external)
      if (d.graph.value_by_name(name) != nullptr) sub.external[name] = pointer;
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
  return exec::Executor::compose(std::move(parts), std::move(transfers), placed.node_count(),
                                 std::move(owner));
}

}  // namespace tandem::host::place
