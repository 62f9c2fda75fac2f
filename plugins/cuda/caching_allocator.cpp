// CUDA backend — the device memory cache (see caching_allocator.hpp).
#include "caching_allocator.hpp"

#include <utility>

namespace tandem::cuda {

CachingAllocator::CachingAllocator(RawAlloc raw_alloc, RawFree raw_free)
    : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
  for (auto& [pointer, size] : live_) raw_free_(pointer);
  live_.clear();
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  const size_t unit = bytes < kSmallLimit ? kSmallRound : kLargeRound;
  return (bytes + unit - 1) / unit * unit;
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* pointer = nullptr;
  size_t block = 0;
  // Best fit: the smallest cached block that is large enough.
  auto it = free_.lower_bound(size);
  const bool fits = it != free_.end() && (size < kSmallLimit ? it->first == size : it->first < 2 * size);
  if (fits) {
    block = it->first;
    pointer = it->second;
    free_.erase(it);
    --stats_.cached_blocks;
  } else {
    pointer = raw_alloc_(size);
    if (pointer == nullptr && !free_.empty()) {
      release_cached_locked();  // give the cache back to the device, retry once
      pointer = raw_alloc_(size);
    }
    if (pointer == nullptr) return nullptr;
    block = size;
    stats_.reserved += block;
    ++stats_.raw_allocations;
  }
  live_.emplace(pointer, block);
  stats_.allocated += block;
  if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  ++stats_.allocations;
  return pointer;
}

bool CachingAllocator::deallocate(void* pointer) {
  if (pointer == nullptr) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(pointer);
  if (it == live_.end()) return false;
  const size_t block = it->second;
  live_.erase(it);
  stats_.allocated -= block;
  free_.emplace(block, pointer);
  ++stats_.cached_blocks;
  return true;
}

size_t CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  return release_cached_locked();
}

size_t CachingAllocator::release_cached_locked() {
  size_t freed = 0;
  for (auto& [size, pointer] : free_) {
    raw_free_(pointer);
    freed += size;
  }
  free_.clear();
  stats_.reserved -= freed;
  stats_.cached_blocks = 0;
  return freed;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  AllocatorStats s = stats_;
  s.largest_free_block = free_.empty() ? 0 : free_.rbegin()->first;
  return s;
}

}  // namespace tandem::cuda
