// The host's per-device allocator: statistics, reuse of freed blocks, the
// peak a plan is compared with, and out-of-memory errors that name the device.
#include <gtest/gtest.h>

#include "device/device_allocator.hpp"
#include "reference_device.hpp"

namespace tandem::test {
namespace {

using DeviceAllocatorTest = ReferenceDevice;
constexpr size_t kGranule = host::DeviceAllocator::kGranule;

TEST_F(DeviceAllocatorTest, CountsLiveBytesPeakAndAllocations) {
  host::DeviceAllocator& a = device_->allocator();
  const host::AllocatorStats before = a.stats();
  auto x = a.allocate(1000, "x");
  auto y = a.allocate(3 * kGranule, "y");
  ASSERT_TRUE(x.ok() && y.ok());
  host::AllocatorStats s = a.stats();
  EXPECT_EQ(s.allocated - before.allocated, 2 * kGranule + 3 * kGranule);  // 1000 rounds up to 1024
  EXPECT_EQ(s.allocations - before.allocations, 2u);
  EXPECT_GE(s.peak, s.allocated);
  a.free(*y);
  s = a.stats();
  EXPECT_EQ(s.allocated - before.allocated, 2 * kGranule);
  EXPECT_EQ(s.reserved - s.allocated, 3 * kGranule) << "a freed block stays cached";
  a.reset_peak();
  EXPECT_EQ(a.stats().peak, a.stats().allocated);
  a.free(*x);
  a.release_cached();
  EXPECT_EQ(a.stats().reserved, a.stats().allocated);
}

TEST_F(DeviceAllocatorTest, ReusesACachedBlockOfAboutTheSameSize) {
  host::DeviceAllocator& a = device_->allocator();
  auto first = a.allocate(64 * kGranule, "first");
  ASSERT_TRUE(first.ok());
  void* block = *first;
  a.free(block);
  const uint64_t calls = a.stats().backend_calls;
  auto again = a.allocate(60 * kGranule, "again");  // within an eighth: the same block
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, block);
  EXPECT_EQ(a.stats().backend_calls, calls);
  auto small = a.allocate(kGranule, "small");  // nothing cached fits: a new block
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(a.stats().backend_calls, calls + 1);
  a.free(*again);
  a.free(*small);
  auto tiny = a.allocate(kGranule, "tiny");  // the small block, not the large one
  ASSERT_TRUE(tiny.ok());
  EXPECT_NE(*tiny, block);
  const host::AllocatorStats s = a.stats();
  EXPECT_EQ(s.cached_blocks, 1u);
  EXPECT_DOUBLE_EQ(s.fragmentation, 0.0) << "one cached block: nothing is scattered";
  a.free(*tiny);
  EXPECT_GT(a.stats().fragmentation, 0.0) << "two cached blocks: the cache is split";
  a.release_cached();
}

TEST_F(DeviceAllocatorTest, AnImpossibleRequestNamesTheDeviceAndWhatItWasFor) {
  auto huge = device_->allocator().allocate(size_t(1) << 62, "the activation arena");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().status, TDM_OUT_OF_MEMORY);
  EXPECT_NE(huge.error().message.find("for the activation arena on reference:0"), std::string::npos)
      << huge.error().message;
}

}  // namespace
}  // namespace tandem::test
