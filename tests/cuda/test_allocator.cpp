// The CUDA backend's caching allocator, with malloc-backed raw callbacks:
// size classes, reuse, statistics, release_cached, fragmentation and the
// release-and-retry path on raw failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <vector>

#include "caching_allocator.hpp"

using tandem::cuda::CachingAllocator;

namespace {

// Counts raw calls; `limit` bytes of raw memory at most (0 = unlimited).
struct RawCounter {
  size_t calls = 0, frees = 0, live_bytes = 0, limit = 0;
  std::map<void*, size_t> live;

  CachingAllocator make() {
    return CachingAllocator(
        [this](size_t n) -> void* {
          if (limit != 0 && live_bytes + n > limit) return nullptr;
          void* p = std::malloc(n);
          ++calls;
          live_bytes += n;
          live[p] = n;
          return p;
        },
        [this](void* p) {
          ++frees;
          live_bytes -= live[p];
          live.erase(p);
          std::free(p);
        });
  }
};

}  // namespace

TEST(CachingAllocator, RoundsToSizeClasses) {
  EXPECT_EQ(CachingAllocator::round_size(0), 512u);
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size((1u << 20) - 1), 1u << 20);
  EXPECT_EQ(CachingAllocator::round_size(1u << 20), 2u << 20);
  EXPECT_EQ(CachingAllocator::round_size((2u << 20) + 1), 4u << 20);
}

TEST(CachingAllocator, ReusesFreedBlocksWithoutRawCalls) {
  RawCounter raw;
  auto a = raw.make();
  void* p = a.allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(a.deallocate(p));
  void* q = a.allocate(900);  // same 1024-byte class
  EXPECT_EQ(q, p);
  EXPECT_EQ(raw.calls, 1u);
  void* r = a.allocate(2000);  // another class: a new raw block
  EXPECT_NE(r, p);
  EXPECT_EQ(raw.calls, 2u);
  a.deallocate(q);
  a.deallocate(r);
}

TEST(CachingAllocator, LargeBlocksAreReusedOnlyWhenNotTooLarge) {
  RawCounter raw;
  auto a = raw.make();
  void* big = a.allocate(64u << 20);
  a.deallocate(big);
  void* small = a.allocate(4u << 20);  // 64 MiB is more than twice 4 MiB: not reused
  EXPECT_NE(small, big);
  void* close = a.allocate(40u << 20);  // 64 < 2·40: reused
  EXPECT_EQ(close, big);
  a.deallocate(small);
  a.deallocate(close);
}

TEST(CachingAllocator, StatisticsTrackAllocatedReservedPeakAndCount) {
  RawCounter raw;
  auto a = raw.make();
  void* p = a.allocate(512);
  void* q = a.allocate(3000);  // 3072
  auto s = a.stats();
  EXPECT_EQ(s.allocated, 512u + 3072u);
  EXPECT_EQ(s.reserved, 512u + 3072u);
  EXPECT_EQ(s.allocations, 2u);
  a.deallocate(q);
  s = a.stats();
  EXPECT_EQ(s.allocated, 512u);
  EXPECT_EQ(s.reserved, 512u + 3072u);  // cached, still reserved
  EXPECT_EQ(s.peak_allocated, 512u + 3072u);
  EXPECT_EQ(s.largest_free_block, 3072u);
  EXPECT_EQ(s.cached_blocks, 1u);
  a.deallocate(p);
  EXPECT_EQ(a.stats().allocated, 0u);
}

TEST(CachingAllocator, ReleaseCachedFreesOnlyCachedBlocks) {
  RawCounter raw;
  auto a = raw.make();
  void* live = a.allocate(100);
  void* dead = a.allocate(5000);
  a.deallocate(dead);
  EXPECT_EQ(a.release_cached(), 5120u);
  EXPECT_EQ(raw.frees, 1u);
  EXPECT_EQ(raw.live.count(live), 1u);
  const auto s = a.stats();
  EXPECT_EQ(s.reserved, 512u);
  EXPECT_EQ(s.largest_free_block, 0u);
  EXPECT_EQ(s.cached_blocks, 0u);
  a.deallocate(live);
}

TEST(CachingAllocator, ReportsFragmentationThroughFreeBlocks) {
  RawCounter raw;
  auto a = raw.make();
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(a.allocate(4096));
  for (int i = 0; i < 8; i += 2) a.deallocate(blocks[i]);  // every other block
  const auto s = a.stats();
  EXPECT_EQ(s.reserved - s.allocated, 4u * 4096u);  // 16 KiB free ...
  EXPECT_EQ(s.largest_free_block, 4096u);           // ... in 4 KiB pieces
  EXPECT_EQ(s.cached_blocks, 4u);
  for (int i = 1; i < 8; i += 2) a.deallocate(blocks[i]);
}

TEST(CachingAllocator, ReleasesTheCacheAndRetriesOnceWhenRawFails) {
  RawCounter raw;
  raw.limit = 7u << 20;
  auto a = raw.make();
  void* p = a.allocate(6u << 20);
  ASSERT_NE(p, nullptr);
  a.deallocate(p);                 // 6 MiB cached
  void* q = a.allocate(3u << 19);  // 2 MiB class: the 6 MiB block is too large to hand out,
  ASSERT_NE(q, nullptr);           // raw fails (6+2 > 7), the cache is released, the retry works
  EXPECT_EQ(raw.frees, 1u);
  EXPECT_EQ(a.stats().reserved, 2u << 20);
  EXPECT_EQ(a.allocate(6u << 20), nullptr);  // really out of memory: nullptr, no throw
  a.deallocate(q);
}

TEST(CachingAllocator, RejectsForeignPointersAndAcceptsNull) {
  RawCounter raw;
  auto a = raw.make();
  int local = 0;
  EXPECT_FALSE(a.deallocate(&local));
  EXPECT_TRUE(a.deallocate(nullptr));
}

TEST(CachingAllocator, DestructorReturnsEverything) {
  RawCounter raw;
  {
    auto a = raw.make();
    a.allocate(100);
    a.deallocate(a.allocate(200000));
  }
  EXPECT_TRUE(raw.live.empty());
}

// What the plugin reports as each allocation's footprint (mem_footprint,
// CudaDevice::footprint = round_size) is what the allocator takes from the
// raw allocator when a run sets up its buffers: the host's plan, which
// counts footprints, equals the reserved and peak figures the run reports.
TEST(CachingAllocator, SetUpOfARunTakesExactlyTheFootprintsThePlanCounts) {
  // A transformer block's buffers, after the host's own 512 B rounding:
  // 2.25 MiB weights, a 9 MiB MLP weight, small norms, an arena, a workspace.
  const size_t requests[] = {2359296, 2359296, 9437184, 1536, 1536, 37748736, 33554432, 512, 1048576};
  RawCounter raw;
  auto a = raw.make();
  uint64_t planned = 0;
  for (size_t bytes : requests) {
    planned += CachingAllocator::round_size(bytes);
    ASSERT_NE(a.allocate(bytes), nullptr);
  }
  EXPECT_EQ(raw.live_bytes, planned);
  EXPECT_EQ(a.stats().reserved, planned);
  EXPECT_EQ(a.stats().peak_allocated, planned);
}
