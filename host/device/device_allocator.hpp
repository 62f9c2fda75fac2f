// The host's allocator of one device: every executor of a run allocates
// through it, so the host knows what each device holds
// whatever the backend reports.
//
// Freed blocks are kept and reused for later requests of about the same
// size (within 1/8 above), which makes re-planning, evaluation executors of
// several batch sizes and calibration cheap. A request the backend refuses
// (out of memory) is retried once after the cache went back to the backend.
//
// Statistics: `allocated` counts live blocks (their rounded size), `reserved`
// adds the cached ones, `peak` is the high-water mark of `allocated` since
// creation or the last reset_peak (the planner's estimates are compared with
// it), `fragmentation` is the share of the cache outside its largest block.
//
// Thread-safe (a communication thread may free while the main thread runs).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "plugin/loaded_plugin.hpp"
#include "util/result.hpp"

namespace tandem::host {

struct AllocatorStats {
  uint64_t allocated = 0;
  uint64_t reserved = 0;
  uint64_t peak = 0;
  uint64_t allocations = 0;    // requests served, from the cache or the backend
  uint64_t backend_calls = 0;  // mem_alloc calls that succeeded
  uint64_t cached_blocks = 0;
  double fragmentation = 0;  // 1 - largest cached block / cached bytes (0: no cache)
};

// A request the backend refused: how much was asked, and how much this
// allocator held then (at least that much fits on the device).
struct AllocationFailure {
  uint64_t requested = 0;
  uint64_t held = 0;
};

class DeviceAllocator {
 public:
  // `id` names the device in messages ("onednn:0").
  DeviceAllocator(const LoadedPlugin& backend, tdm_device* device, std::string id)
      : backend_(backend), device_(device), id_(std::move(id)) {}
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;
  // Gives the cache back; live blocks are their owners' to free first.
  ~DeviceAllocator();

  // `what` names the request in the error ("the activation arena").
  // Errors carry TDM_OUT_OF_MEMORY (or the backend's status) and the
  // device's figures.
  Result<void*> allocate(size_t bytes, const std::string& what);
  void free(void* pointer) noexcept;
  // Returns every cached block to the backend.
  void release_cached() noexcept;
  AllocatorStats stats() const;
  void reset_peak();
  // The last request the backend refused since the previous call, if any.
  std::optional<AllocationFailure> take_failure();

  // Requests are rounded up to this, so reused blocks line up.
  static constexpr size_t kGranule = 512;
  // What a request of `bytes` is rounded up to (at least one granule).
  static size_t rounded(size_t bytes) {
    return (std::max<size_t>(bytes, 1) + kGranule - 1) / kGranule * kGranule;
  }

 private:
  void release_cached_locked() noexcept;

  const LoadedPlugin& backend_;
  tdm_device* device_;
  std::string id_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;  // block -> its size
  std::multimap<size_t, void*> cached_;     // size -> block
  AllocatorStats stats_;
  std::optional<AllocationFailure> failure_;
};

}  // namespace tandem::host
