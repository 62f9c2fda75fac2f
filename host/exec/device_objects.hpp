// Owned streams, events and host staging buffers of one device, released
// through the backend that made them (sdk/ABI.md rule 16). Each keeps a pointer
// to its DeviceHandle, which must outlive it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "device/device.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {

// The plugin's message for a failed call (its last error), else the status.
std::string plugin_reason(tdm_status status);

class OwnedStream {
 public:
  static Result<OwnedStream> create(const DeviceHandle& device, const std::string& purpose);
  OwnedStream() = default;
  OwnedStream(OwnedStream&& other) noexcept;
  OwnedStream& operator=(OwnedStream&& other) noexcept;
  ~OwnedStream();
  tdm_stream* get() const noexcept { return stream_; }
  explicit operator bool() const noexcept { return stream_ != nullptr; }

 private:
  const DeviceHandle* device_ = nullptr;
  tdm_stream* stream_ = nullptr;
};

class OwnedEvent {
 public:
  static Result<OwnedEvent> create(const DeviceHandle& device);
  OwnedEvent() = default;
  OwnedEvent(OwnedEvent&& other) noexcept;
  OwnedEvent& operator=(OwnedEvent&& other) noexcept;
  ~OwnedEvent();
  tdm_event* get() const noexcept { return event_; }
  const DeviceHandle* device() const noexcept { return device_; }
  explicit operator bool() const noexcept { return event_ != nullptr; }

 private:
  const DeviceHandle* device_ = nullptr;
  tdm_event* event_ = nullptr;
};

// Host memory a device copies from and to: page-locked through
// host_alloc_pinned of the first of `devices` that has it (optional in the
// ABI), else ordinary memory, which every backend accepts (just slower).
class HostStaging {
 public:
  static Result<HostStaging> allocate(size_t bytes, std::initializer_list<const DeviceHandle*> devices);
  HostStaging() = default;
  HostStaging(HostStaging&& other) noexcept;
  HostStaging& operator=(HostStaging&& other) noexcept;
  ~HostStaging();
  void* data() const noexcept { return pinned_ != nullptr ? pinned_ : plain_.get(); }
  bool pinned() const noexcept { return pinned_ != nullptr; }

 private:
  void release() noexcept;
  const DeviceHandle* owner_ = nullptr;  // the device whose pinned memory this is
  void* pinned_ = nullptr;
  std::unique_ptr<unsigned char[]> plain_;
};

}  // namespace tandem::host::exec
