#include "exec/message_buffers.hpp"

#include <utility>

#include "exec/device_objects.hpp"
#include "util/last_error.hpp"

namespace tandem::host::exec {

Result<void*> MessageBuffers::take(size_t bytes, const std::string& name) {
  auto it = free_.find(bytes);
  if (it != free_.end()) {
    void* buffer = it->second;
    free_.erase(it);
    return buffer;
  }
  return owner_.reserve_buffer(bytes, "the pipeline's message buffer for '" + name + "'");
}

void MessageBuffers::give_back(void* buffer, size_t bytes) {
  free_.emplace(bytes, buffer);
}

MessageBytes& MessageBytes::operator=(MessageBytes&& other) noexcept {
  if (this == &other) return *this;
  release();
  host_ = std::move(other.host_);
  pool_ = std::exchange(other.pool_, nullptr);
  device_ = std::exchange(other.device_, nullptr);
  size_ = std::exchange(other.size_, 0);
  return *this;
}

void MessageBytes::release() noexcept {
  if (pool_ != nullptr && device_ != nullptr) pool_->give_back(device_, size_);
  pool_ = nullptr;
  device_ = nullptr;
}

Result<void> copy_on_device(DeviceExecutor& executor, void* into, const void* from, size_t bytes,
                            bool sending, const std::string& name) {
  const auto failed = [&](const std::string& why, tdm_status status) {
    return make_error(std::string(sending ? "sending '" : "receiving '") + name + "': " + why, status);
  };
  if (into == nullptr || from == nullptr)
    return failed("the value has no device memory on " + executor.device().id() + " (internal)",
                  TDM_INTERNAL);
  const tdm_backend_api& api = *executor.device().backend().backend;
  clear_last_error();
  tdm_status status = api.copy_d2d(executor.stream(), into, from, bytes);
  if (status == TDM_OK) status = api.stream_synchronize(executor.stream());
  if (status == TDM_OK) return {};
  return failed("copying " + std::to_string(bytes) + " bytes on " + executor.device().id() +
                    " failed: " + plugin_reason(status),
                status);
}

}  // namespace tandem::host::exec
