#include "program/run_devices.hpp"

#include <algorithm>

#include "program/device_select.hpp"

namespace tandem::host::program {

RunDevices::RunDevices(const PluginRegistry& registry, const DeviceHandle& main,
                       const std::map<std::string, const DeviceHandle*>& open,
                       std::map<std::string, uint64_t> budgets)
    : registry_(registry), main_(main), budgets_(std::move(budgets)), devices_(open) {
  devices_[main.id()] = &main;
  resolved_[main.id()] = main.id();
}

Result<std::string> RunDevices::open(const std::string& name) {
  if (auto it = resolved_.find(name); it != resolved_.end()) return it->second;
  auto handle = select_device(registry_, name);
  if (!handle) return handle.error();
  const std::string id = handle->id();
  resolved_[name] = id;
  if (devices_.count(id) == 0) {
    opened_.push_back(std::make_unique<DeviceHandle>(std::move(*handle)));
    devices_[id] = opened_.back().get();
  }
  return id;
}

Result<std::vector<std::string>> RunDevices::candidates(const std::vector<std::string>& named) {
  std::vector<std::string> ids = {main_.id()};
  std::vector<std::string> names = named;
  for (const auto& [id, budget] : budgets_) names.push_back(id);
  for (const std::string& name : names) {
    auto id = open(name);
    if (!id) return make_error("--device " + name + ": " + id.error().message, id.error().status);
    if (std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  }
  return ids;
}

uint32_t RunDevices::lowest_abi_minor() const {
  uint32_t minor = main_.backend().abi_minor_effective;
  for (const auto& [id, handle] : devices_) minor = std::min(minor, handle->backend().abi_minor_effective);
  return minor;
}

std::map<std::string, uint64_t> RunDevices::capacities() const {
  std::map<std::string, uint64_t> out;
  for (const auto& [id, handle] : devices_) {
    if (auto b = budgets_.find(id); b != budgets_.end()) {
      out[id] = b->second;
    } else if (auto info = handle->info(); info && info->free_memory > 0) {
      out[id] = info->free_memory;
    }
    // What the device held when it ran out replaces what it reported free
    // (which the run's own cached blocks may have lowered meanwhile).
    if (auto measured = measured_.find(id); measured != measured_.end()) {
      auto budget = budgets_.find(id);
      out[id] = budget != budgets_.end() ? std::min(budget->second, measured->second) : measured->second;
    }
  }
  return out;
}

std::map<std::string, std::string> RunDevices::limit_kinds(bool whole_memory) const {
  std::map<std::string, std::string> out;
  for (const auto& [id, handle] : devices_)
    if (budgets_.count(id) == 0) out[id] = whole_memory ? "total" : measured_.count(id) > 0 ? "held" : "free";
  return out;
}

std::string RunDevices::offload_device() const {
  for (const auto& [id, handle] : devices_)
    if (auto info = handle->info(); info && info->kind == TDM_DEVICE_CPU) return id;
  if (auto cpu = select_device(registry_, "cpu")) return cpu->id();
  return "";
}

std::optional<place::PlanEstimate> RunDevices::over_whole_memory(place::PlanEstimate estimate) const {
  bool over = false;
  for (place::DeviceEstimate& d : estimate.devices) {
    const auto device = devices_.find(d.device);
    if (budgets_.count(d.device) > 0 || device == devices_.end()) continue;
    if (auto info = device->second->info(); info && info->total_memory > 0) {
      d.budget = info->total_memory;
      over = over || d.over() > 0;
    }
  }
  if (!over) return std::nullopt;
  return estimate;
}

}  // namespace tandem::host::program
