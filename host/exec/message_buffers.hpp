// The bytes of a pipeline stage's messages (rank_pipeline.hpp). On a link
// of host memory each message has a host buffer of its own. On a link that
// moves device memory (a GPU's comm plugin) messages live in device
// buffers: a value is copied into one on the device after the segment that
// made it, and out of one into the value that reads it, so the bytes never
// cross to the host. The buffers are reserved from the executor (counted in
// its memory, kept until it ends) and reused by size once their message is
// done, so the steps after the first reserve nothing.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "exec/device_executor.hpp"

namespace tandem::host::exec {

class MessageBuffers {
 public:
  explicit MessageBuffers(Executor& owner) : owner_(owner) {}
  // A buffer of `bytes` for the message of value `name`.
  Result<void*> take(size_t bytes, const std::string& name);
  void give_back(void* buffer, size_t bytes);

 private:
  Executor& owner_;
  std::multimap<size_t, void*> free_;
};

// One message's bytes: its own host buffer, or a device buffer of a pool's,
// given back when the message is dropped.
class MessageBytes {
 public:
  MessageBytes() = default;
  explicit MessageBytes(size_t bytes) : host_(bytes), size_(bytes) {}
  MessageBytes(MessageBuffers& pool, void* device, size_t bytes)
      : pool_(&pool), device_(device), size_(bytes) {}
  MessageBytes(MessageBytes&& other) noexcept { *this = std::move(other); }
  MessageBytes& operator=(MessageBytes&& other) noexcept;
  MessageBytes(const MessageBytes&) = delete;
  MessageBytes& operator=(const MessageBytes&) = delete;
  ~MessageBytes() { release(); }

  void* data() noexcept { return pool_ != nullptr ? device_ : host_.data(); }
  size_t size() const noexcept { return size_; }
  bool on_device() const noexcept { return pool_ != nullptr; }

 private:
  void release() noexcept;
  std::vector<char> host_;
  MessageBuffers* pool_ = nullptr;
  void* device_ = nullptr;
  size_t size_ = 0;
};

// `bytes` from `from` to `into`, both device memory of `executor`'s device,
// on its stream; complete when it returns. An error names the message of
// value `name`, `sending` it or receiving it.
Result<void> copy_on_device(DeviceExecutor& executor, void* into, const void* from, size_t bytes,
                            bool sending, const std::string& name);

}  // namespace tandem::host::exec
