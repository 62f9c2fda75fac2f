#include "exec/device_objects.hpp"

#include <utility>

#include "util/last_error.hpp"

namespace tandem::host::exec {

std::string plugin_reason(tdm_status status) {
  std::optional<LastError> why = take_last_error();
  return why && !why->message.empty() ? why->message : silent_failure(status);
}

Result<OwnedStream> OwnedStream::create(const DeviceHandle& device, const std::string& purpose) {
  OwnedStream s;
  clear_last_error();
  const tdm_status status = device.backend().backend->stream_create(device.get(), &s.stream_);
  if (status != TDM_OK || s.stream_ == nullptr)
    return make_error(
        "cannot create a " + purpose + " stream on " + device.id() + ": " + plugin_reason(status),
        status != TDM_OK ? status : TDM_INTERNAL);
  s.device_ = &device;
  return s;
}

OwnedStream::OwnedStream(OwnedStream&& other) noexcept
    : device_(other.device_), stream_(std::exchange(other.stream_, nullptr)) {}

OwnedStream& OwnedStream::operator=(OwnedStream&& other) noexcept {
  std::swap(device_, other.device_);
  std::swap(stream_, other.stream_);
  return *this;
}

OwnedStream::~OwnedStream() {
  if (stream_ == nullptr) return;
  const tdm_backend_api& api = *device_->backend().backend;
  (void)api.stream_synchronize(stream_);  // nothing enqueued may outlive the stream
  api.stream_destroy(stream_);
}

Result<OwnedEvent> OwnedEvent::create(const DeviceHandle& device) {
  OwnedEvent e;
  clear_last_error();
  const tdm_status status = device.backend().backend->event_create(device.get(), &e.event_);
  if (status != TDM_OK || e.event_ == nullptr)
    return make_error("cannot create an event on " + device.id() + ": " + plugin_reason(status),
                      status != TDM_OK ? status : TDM_INTERNAL);
  e.device_ = &device;
  return e;
}

OwnedEvent::OwnedEvent(OwnedEvent&& other) noexcept
    : device_(other.device_), event_(std::exchange(other.event_, nullptr)) {}

OwnedEvent& OwnedEvent::operator=(OwnedEvent&& other) noexcept {
  std::swap(device_, other.device_);
  std::swap(event_, other.event_);
  return *this;
}

OwnedEvent::~OwnedEvent() {
  if (event_ != nullptr) device_->backend().backend->event_destroy(event_);
}

Result<HostStaging> HostStaging::allocate(size_t bytes, std::initializer_list<const DeviceHandle*> devices) {
  HostStaging h;
  const size_t size = bytes == 0 ? 1 : bytes;
  for (const DeviceHandle* device : devices) {
    const tdm_backend_api& api = *device->backend().backend;
    if (api.host_alloc_pinned == nullptr || api.host_free_pinned == nullptr) continue;
    void* pointer = nullptr;
    clear_last_error();
    if (api.host_alloc_pinned(device->get(), size, &pointer) == TDM_OK && pointer != nullptr) {
      h.owner_ = device;
      h.pinned_ = pointer;
      return h;
    }
    clear_last_error();  // pinned memory is a speed-up, not a need: fall back below
  }
  h.plain_ = std::make_unique<unsigned char[]>(size);
  return h;
}

HostStaging::HostStaging(HostStaging&& other) noexcept
    : owner_(other.owner_), pinned_(std::exchange(other.pinned_, nullptr)), plain_(std::move(other.plain_)) {}

HostStaging& HostStaging::operator=(HostStaging&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = other.owner_;
    pinned_ = std::exchange(other.pinned_, nullptr);
    plain_ = std::move(other.plain_);
  }
  return *this;
}

HostStaging::~HostStaging() {
  release();
}

void HostStaging::release() noexcept {
  if (pinned_ != nullptr) owner_->backend().backend->host_free_pinned(owner_->get(), pinned_);
  pinned_ = nullptr;
}

}  // namespace tandem::host::exec
