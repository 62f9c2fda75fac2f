// Reference backend — the one CPU device "reference:0".
//
// Memory is ordinary host memory (host_addressable = 1), 64-byte aligned.
// Streams and events keep tandem.hpp's synchronous defaults: every kernel
// runs to completion inside kernel_launch.
#ifndef TANDEM_REFERENCE_DEVICE_HPP
#define TANDEM_REFERENCE_DEVICE_HPP

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "tandem/tandem.hpp"

namespace tandem::reference {

class ReferenceDevice final : public Device {
 public:
  tdm_device_info info() override;
  void* allocate(size_t bytes) override;
  void deallocate(void* pointer) noexcept override;
  std::unique_ptr<Kernel> prepare(const OpView& op, size_t& workspace_bytes) override;
  tdm_memory_stats memory_stats() override;

 private:
  std::mutex mutex_;  // guards everything below
  std::unordered_map<void*, size_t> sizes_;
  uint64_t allocated_ = 0;
  uint64_t peak_ = 0;
  uint64_t allocations_ = 0;
};

class ReferenceBackend final : public Backend {
 public:
  uint32_t device_count() override { return 1; }
  Device& device(uint32_t index) override;

 private:
  ReferenceDevice device_;
};

}  // namespace tandem::reference

#endif  // TANDEM_REFERENCE_DEVICE_HPP
