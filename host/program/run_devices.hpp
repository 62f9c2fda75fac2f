// The devices of a program: the one it runs on, those --device, the memory
// budgets, the model file's pins and [train] optimizer_device name, each
// opened once and known by id; their budgets, and what each can hold (its
// budget, what it reports free, or what it held when it ran out at run time).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "place/plan_estimate.hpp"
#include "plugin/registry.hpp"
#include "util/result.hpp"

namespace tandem::host::program {

class RunDevices {
 public:
  // `main`: the device the program runs on; `open`: devices a caller
  // already opened (an evaluation shares its training run's), by id.
  RunDevices(const PluginRegistry& registry, const DeviceHandle& main,
             const std::map<std::string, const DeviceHandle*>& open, std::map<std::string, uint64_t> budgets);
  RunDevices(const RunDevices&) = delete;
  RunDevices& operator=(const RunDevices&) = delete;

  // The device a pin or --device names ("cpu", "onednn:0"), opened once:
  // its id.
  Result<std::string> open(const std::string& name);
  // The main device, then each of `named` and each budgeted device: their
  // ids, each once, in that order. Errors name the --device.
  Result<std::vector<std::string>> candidates(const std::vector<std::string>& named);
  // The lowest negotiated ABI minor of their backends.
  uint32_t lowest_abi_minor() const;

  const std::map<std::string, const DeviceHandle*>& by_id() const noexcept { return devices_; }
  size_t count() const noexcept { return devices_.size(); }
  const std::map<std::string, uint64_t>& budgets() const noexcept { return budgets_; }

  // What each device may hold: its budget, else what it reports free; once
  // it ran out, what it held then (capped by its budget).
  std::map<std::string, uint64_t> capacities() const;
  // A device ran out of memory at run time holding `held` bytes of the run.
  void ran_out(const std::string& id, uint64_t held) { measured_[id] = held; }
  // Per device without a budget, what limits it in messages: "total" (its
  // whole memory, with `whole_memory`), "held" (after running out) or "free".
  std::map<std::string, std::string> limit_kinds(bool whole_memory) const;
  // The first CPU device of the run, else the machine's CPU backend's: where
  // an optimizer offload would go ("" when there is none).
  std::string offload_device() const;
  // `estimate` with each device without a budget limited by its whole
  // memory, when one needs more than that (nothing otherwise).
  std::optional<place::PlanEstimate> over_whole_memory(place::PlanEstimate estimate) const;

 private:
  const PluginRegistry& registry_;
  const DeviceHandle& main_;
  std::map<std::string, uint64_t> budgets_;
  std::vector<std::unique_ptr<DeviceHandle>> opened_;   // devices opened here
  std::map<std::string, const DeviceHandle*> devices_;  // every device of the run, by id
  std::map<std::string, std::string> resolved_;         // a name as written -> its device id
  std::map<std::string, uint64_t> measured_;            // devices that ran out: what they held
};

}  // namespace tandem::host::program
