// A thin RAII layer over a backend plugin's devices.
//
// Device names are "<backend>:<index>" ("reference:0", "cuda:1"). A backend
// whose driver or hardware is absent still loads; its device_count answers
// TDM_UNAVAILABLE with a reason, reported as "cuda: no device (<reason>)".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device/device_allocator.hpp"
#include "plugin/loaded_plugin.hpp"
#include "util/result.hpp"

namespace tandem::host {

class PluginRegistry;

struct DeviceInfo {
  std::string id;       // "reference:0"
  std::string backend;  // "reference"
  std::string name;     // the device's own name
  tdm_device_kind kind = TDM_DEVICE_CPU;
  uint64_t total_memory = 0;
  uint64_t free_memory = 0;
  bool has_pinned_host_memory = false;
  bool host_addressable = false;
  std::string features;  // "avx2 fma", "sm_90"; empty when the backend does not say (ABI < 1.4)
};

class DeviceHandle {
 public:
  static Result<DeviceHandle> open(const LoadedPlugin& backend, uint32_t index);
  DeviceHandle(DeviceHandle&& other) noexcept;
  DeviceHandle& operator=(DeviceHandle&& other) noexcept;
  DeviceHandle(const DeviceHandle&) = delete;
  DeviceHandle& operator=(const DeviceHandle&) = delete;
  ~DeviceHandle();

  std::string id() const;
  Result<DeviceInfo> info() const;
  // Allocator statistics (ABI 1.1, optional): nullopt when the backend does
  // not provide them; callers fall back to device_info's memory figures.
  std::optional<tdm_memory_stats> memory_stats() const;
  // The device memory one allocation of `bytes` through allocator() takes:
  // the host allocator's granule, then the backend's rounding (ABI 1.6
  // mem_footprint; absent or failing: the granule alone). Plans count this.
  uint64_t allocation_footprint(uint64_t bytes) const;
  // Whether this device's backend copies straight into `to`'s memory (ABI
  // 1.7 peer_access and copy_peer; two devices of one backend, e.g. two GPUs
  // with peer access, which this turns on). False when the backend lacks the
  // functions or says no: copies then go through host memory.
  bool copies_directly_to(const DeviceHandle& to) const;
  // Whether the memory plan may bind the op table's reuse pairs of its own
  // accord (ABI 1.9, sdk/ABI.md rule 31): an add, sub or mul over a dead
  // operand, a gradient op's dx over its dead addend. Older backends get
  // separate buffers.
  bool takes_sums_over_operands() const noexcept { return backend_->abi_minor_effective >= 9; }

  // The host's allocator of this device: executors allocate through it.
  DeviceAllocator& allocator() const noexcept { return *allocator_; }

  // What the device itself says is in use since it was opened: its free
  // memory then (device_info) minus its free memory now. On a GPU that is
  // cudaMemGetInfo's view, which also sees what no allocator of the host
  // counts (library handles and their workspaces, the backend's own size
  // classes), and what other processes on the same GPU took meanwhile.
  // nullopt where the device's memory is the machine's (a CPU backend
  // without TANDEM_DEVICE_MEMORY_LIMIT: its free memory is the whole
  // machine's, which every process moves) or it reports none.
  std::optional<uint64_t> reported_use() const;

  tdm_device* get() const noexcept { return device_; }
  const LoadedPlugin& backend() const noexcept { return *backend_; }
  uint32_t index() const noexcept { return index_; }

 private:
  DeviceHandle(const LoadedPlugin& backend, uint32_t index, tdm_device* device)
      : backend_(&backend),
        index_(index),
        device_(device),
        allocator_(std::make_unique<DeviceAllocator>(backend, device, id())) {}
  void close() noexcept;

  const LoadedPlugin* backend_ = nullptr;
  uint32_t index_ = 0;
  tdm_device* device_ = nullptr;
  uint64_t free_at_open_ = 0;                   // 0: not a memory of its own (reported_use)
  std::unique_ptr<DeviceAllocator> allocator_;  // released before the device is closed
};

// Number of devices; Error with status TDM_UNAVAILABLE and the plugin's
// reason ("driver not found") when it has none.
Result<uint32_t> device_count(const LoadedPlugin& backend);

struct BackendDevices {
  std::string backend;
  std::vector<DeviceInfo> devices;
  std::string no_device_reason;  // set when the backend has no device
};

// Every device of every backend plugin, in load order.
std::vector<BackendDevices> enumerate_devices(const PluginRegistry& registry);

}  // namespace tandem::host
