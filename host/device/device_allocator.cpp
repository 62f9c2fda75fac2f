#include "device/device_allocator.hpp"

#include <algorithm>
#include <utility>

#include "util/format.hpp"
#include "util/last_error.hpp"

namespace tandem::host {

DeviceAllocator::~DeviceAllocator() {
  release_cached();
}

Result<void*> DeviceAllocator::allocate(size_t bytes, const std::string& what) {
  const size_t size = rounded(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* pointer = nullptr;
  size_t held = size;
  // The smallest cached block that fits without wasting more than an eighth.
  if (auto it = cached_.lower_bound(size); it != cached_.end() && it->first <= size + size / 8) {
    held = it->first;
    pointer = it->second;
    cached_.erase(it);
  } else {
    const tdm_backend_api& api = *backend_.backend;
    tdm_status status = TDM_OK;
    for (int attempt = 0; attempt < 2; ++attempt) {
      clear_last_error();
      status = api.mem_alloc(device_, size, &pointer);
      if (status == TDM_OK && pointer != nullptr) break;
      if (status != TDM_OUT_OF_MEMORY || cached_.empty()) break;
      release_cached_locked();  // the cache may be what stands in the way
    }
    if (status != TDM_OK || pointer == nullptr) {
      if (status == TDM_OUT_OF_MEMORY) failure_ = AllocationFailure{size, stats_.allocated};
      const std::string why = last_error_text(silent_failure(status));
      return make_error("cannot allocate " + human_bytes(bytes) + " for " + what + " on " + id_ + " (" +
                            human_bytes(stats_.allocated) + " already held by this run): " + why,
                        status != TDM_OK ? status : TDM_OUT_OF_MEMORY);
    }
    ++stats_.backend_calls;
    stats_.reserved += held;
  }
  live_[pointer] = held;
  stats_.allocated += held;
  stats_.peak = std::max(stats_.peak, stats_.allocated);
  ++stats_.allocations;
  return pointer;
}

void DeviceAllocator::free(void* pointer) noexcept {
  if (pointer == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(pointer);
  if (it == live_.end()) return;  // not ours: never free what we did not allocate
  stats_.allocated -= it->second;
  cached_.emplace(it->second, pointer);
  live_.erase(it);
}

void DeviceAllocator::release_cached() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void DeviceAllocator::release_cached_locked() noexcept {
  const tdm_backend_api& api = *backend_.backend;
  for (const auto& [size, pointer] : cached_) {
    api.mem_free(device_, pointer);
    stats_.reserved -= size;
  }
  cached_.clear();
}

AllocatorStats DeviceAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  AllocatorStats s = stats_;
  s.cached_blocks = cached_.size();
  const uint64_t cached = s.reserved - s.allocated;
  const uint64_t largest = cached_.empty() ? 0 : cached_.rbegin()->first;
  s.fragmentation = cached > 0 ? 1.0 - static_cast<double>(largest) / static_cast<double>(cached) : 0.0;
  return s;
}

std::optional<AllocationFailure> DeviceAllocator::take_failure() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(failure_, std::nullopt);
}

void DeviceAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak = stats_.allocated;
}

}  // namespace tandem::host
