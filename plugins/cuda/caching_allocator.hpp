// CUDA backend — the device memory cache, in plain C++ (no CUDA header), so
// it is unit-tested on the CPU with malloc-backed callbacks (tests/cuda).
//
// Why a cache: cudaMalloc/cudaFree synchronise the device and cost tens of
// microseconds; a training step allocates and frees the same sizes every
// step. Freed blocks are kept and handed out again.
//
// Stream-ordering rule (the reason reuse is safe without events): the cache
// is per device, not per stream, and a block is reused as soon as it is
// freed. That is correct because the host frees a buffer only after every
// kernel that uses it has been enqueued, and it orders any later user of the
// same memory after that work (same stream, or an event the later stream
// waits on) — the executor's plan does this for all its buffers. A caller
// that frees memory still read by an unordered stream must synchronise first.
//
// Size classes: requests are rounded up to 512 B below 1 MiB and to 2 MiB
// above, so sizes that differ slightly share blocks. A free block is reused
// for a request when it is at least the rounded size and (for large blocks)
// less than twice it, so a huge cached block is not pinned by a small
// request. Blocks are never split: fragmentation shows as cached free
// blocks, reported through largest_free_block.
#ifndef TANDEM_CUDA_CACHING_ALLOCATOR_HPP
#define TANDEM_CUDA_CACHING_ALLOCATOR_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

namespace tandem::cuda {

struct AllocatorStats {
  uint64_t allocated = 0;        // bytes in live blocks (rounded sizes)
  uint64_t reserved = 0;         // bytes obtained from the raw allocator
  uint64_t peak_allocated = 0;   // high-water mark of allocated
  uint64_t allocations = 0;      // successful allocate() calls
  uint64_t raw_allocations = 0;  // calls of the raw allocator that succeeded
  uint64_t cached_blocks = 0;    // free blocks held
  uint64_t largest_free_block = 0;
};

class CachingAllocator {
 public:
  // raw_alloc returns nullptr on failure; raw_free releases what it returned.
  using RawAlloc = std::function<void*(size_t)>;
  using RawFree = std::function<void(void*)>;

  static constexpr size_t kSmallLimit = size_t(1) << 20;  // 1 MiB
  static constexpr size_t kSmallRound = 512;
  static constexpr size_t kLargeRound = size_t(2) << 20;  // 2 MiB

  CachingAllocator(RawAlloc raw_alloc, RawFree raw_free);
  ~CachingAllocator();  // returns every block, cached or live, to raw_free
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  static size_t round_size(size_t bytes);

  // A block of at least `bytes` (0 is treated as 1). On raw failure the
  // cache is released and the raw allocation retried once; nullptr if that
  // fails too. Thread-safe.
  void* allocate(size_t bytes);
  // Returns the block to the cache. False for a pointer this allocator did
  // not hand out (nothing happens then). nullptr is accepted (true).
  bool deallocate(void* pointer);
  // Gives every cached free block back to raw_free; returns the bytes freed.
  size_t release_cached();

  AllocatorStats stats() const;

 private:
  size_t release_cached_locked();

  RawAlloc raw_alloc_;
  RawFree raw_free_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;  // pointer -> block size
  std::multimap<size_t, void*> free_;       // block size -> pointer
  AllocatorStats stats_;
};

}  // namespace tandem::cuda

#endif  // TANDEM_CUDA_CACHING_ALLOCATOR_HPP
