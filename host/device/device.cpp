#include "device/device.hpp"

#include <algorithm>
#include <utility>

#include "plugin/optional_call.hpp"
#include "plugin/registry.hpp"
#include "util/host_memory.hpp"
#include "util/last_error.hpp"

namespace tandem::host {

Result<uint32_t> device_count(const LoadedPlugin& backend) {
  if (backend.backend == nullptr)
    return make_error("plugin " + backend.name + " is not a backend", TDM_INVALID_ARGUMENT);
  uint32_t count = 0;
  clear_last_error();
  tdm_status status = backend.backend->device_count(&count);
  if (status == TDM_UNAVAILABLE) {
    std::optional<LastError> why = take_last_error();
    return make_error(why && !why->message.empty() ? why->message : "the backend reports no usable device",
                      TDM_UNAVAILABLE);
  }
  if (status != TDM_OK)
    return make_error(backend.name + ": cannot count devices: " + last_error_text(silent_failure(status)),
                      status);
  return count;
}

namespace {

// A device whose free memory is its own to count: a GPU, or a CPU device
// given a capacity below the machine's (TANDEM_DEVICE_MEMORY_LIMIT).
bool has_own_memory(const DeviceInfo& info) {
  if (info.free_memory == 0) return false;
  if (!info.host_addressable) return true;
  const uint64_t machine = physical_memory_bytes();
  return machine > 0 && info.total_memory < machine;
}

}  // namespace

Result<DeviceHandle> DeviceHandle::open(const LoadedPlugin& backend, uint32_t index) {
  if (backend.backend == nullptr)
    return make_error("plugin " + backend.name + " is not a backend", TDM_INVALID_ARGUMENT);
  tdm_device* device = nullptr;
  clear_last_error();
  tdm_status status = backend.backend->device_open(index, &device);
  if (status != TDM_OK || device == nullptr)
    return make_error("cannot open device " + backend.name + ":" + std::to_string(index) + ": " +
                          last_error_text("[" + backend.name + "] status " + std::to_string(status)),
                      status != TDM_OK ? status : TDM_INTERNAL);
  DeviceHandle handle(backend, index, device);
  if (Result<DeviceInfo> info = handle.info(); info && has_own_memory(*info))
    handle.free_at_open_ = info->free_memory;
  return handle;
}

std::optional<uint64_t> DeviceHandle::reported_use() const {
  if (free_at_open_ == 0) return std::nullopt;
  Result<DeviceInfo> now = info();
  if (!now) return std::nullopt;
  return now->free_memory < free_at_open_ ? free_at_open_ - now->free_memory : 0;
}

DeviceHandle::DeviceHandle(DeviceHandle&& other) noexcept
    : backend_(other.backend_),
      index_(other.index_),
      device_(std::exchange(other.device_, nullptr)),
      free_at_open_(other.free_at_open_),
      allocator_(std::move(other.allocator_)) {}

DeviceHandle& DeviceHandle::operator=(DeviceHandle&& other) noexcept {
  if (this != &other) {
    close();
    backend_ = other.backend_;
    index_ = other.index_;
    device_ = std::exchange(other.device_, nullptr);
    allocator_ = std::move(other.allocator_);
    free_at_open_ = other.free_at_open_;
  }
  return *this;
}

DeviceHandle::~DeviceHandle() {
  close();
}

void DeviceHandle::close() noexcept {
  allocator_.reset();
  if (device_ != nullptr && backend_->backend->device_close != nullptr)
    backend_->backend->device_close(device_);
  device_ = nullptr;
}

std::string DeviceHandle::id() const {
  return backend_->name + ":" + std::to_string(index_);
}

Result<DeviceInfo> DeviceHandle::info() const {
  tdm_device_info raw{};
  raw.struct_size = sizeof raw;  // the size this host can receive
  clear_last_error();
  tdm_status status = backend_->backend->device_info(device_, &raw);
  if (status != TDM_OK)
    return make_error("cannot query device " + id() + ": " +
                          last_error_text("[" + backend_->name + "] status " + std::to_string(status)),
                      status);
  DeviceInfo info;
  info.id = id();
  info.backend = backend_->name;
  info.name = raw.name != nullptr ? raw.name : "";
  info.kind = raw.kind;
  info.total_memory = raw.total_memory;
  info.free_memory = raw.free_memory;
  info.has_pinned_host_memory = raw.has_pinned_host_memory != 0;
  info.host_addressable = raw.host_addressable != 0;
  if (TDM_STRUCT_HAS(&raw, tdm_device_info, features) && raw.features != nullptr)
    info.features = raw.features;
  return info;
}

uint64_t DeviceHandle::allocation_footprint(uint64_t bytes) const {
  const uint64_t granule = DeviceAllocator::rounded(bytes);
  auto fn = TANDEM_OPTIONAL_FN(*backend_, backend, tdm_backend_api, mem_footprint, 6);
  uint64_t backend_bytes = 0;
  if (fn == nullptr || fn(device_, granule, &backend_bytes) != TDM_OK) {
    clear_last_error();
    return granule;
  }
  return std::max(granule, backend_bytes);
}

bool DeviceHandle::copies_directly_to(const DeviceHandle& to) const {
  if (backend_ != to.backend_ || index_ == to.index_) return false;
  auto access = TANDEM_OPTIONAL_FN(*backend_, backend, tdm_backend_api, peer_access, 7);
  auto copy = TANDEM_OPTIONAL_FN(*backend_, backend, tdm_backend_api, copy_peer, 7);
  if (access == nullptr || copy == nullptr) return false;
  int32_t yes = 0;
  clear_last_error();
  if (access(device_, to.device_, &yes) != TDM_OK) {
    clear_last_error();  // an optional call's failure is its fallback (ABI.md rule 23)
    return false;
  }
  return yes == 1;
}

std::optional<tdm_memory_stats> DeviceHandle::memory_stats() const {
  auto fn = TANDEM_OPTIONAL_FN(*backend_, backend, tdm_backend_api, memory_stats, 1);
  if (fn == nullptr) return std::nullopt;
  tdm_memory_stats stats{};
  stats.struct_size = sizeof stats;
  clear_last_error();
  if (fn(device_, &stats) != TDM_OK) {
    clear_last_error();
    return std::nullopt;
  }
  return stats;
}

std::vector<BackendDevices> enumerate_devices(const PluginRegistry& registry) {
  std::vector<BackendDevices> out;
  for (const LoadedPlugin* plugin : registry.by_kind(TDM_PLUGIN_BACKEND)) {
    BackendDevices entry;
    entry.backend = plugin->name;
    Result<uint32_t> count = device_count(*plugin);
    if (!count) {
      entry.no_device_reason = count.error().message;
    } else if (*count == 0) {
      entry.no_device_reason = "the backend reports 0 devices";
    }
    for (uint32_t i = 0; count && i < *count; ++i) {
      Result<DeviceHandle> device = DeviceHandle::open(*plugin, i);
      if (!device) {
        entry.no_device_reason = device.error().message;
        continue;
      }
      Result<DeviceInfo> info = device->info();
      if (!info) {
        entry.no_device_reason = info.error().message;
        continue;
      }
      entry.devices.push_back(std::move(*info));
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace tandem::host
