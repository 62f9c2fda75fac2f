// Device, memory statistics and plugin metadata of the reference backend.
#include <cstdint>

#include "expect.hpp"

using namespace ref_test;

TEST(Device, MetadataAndInfo) {
  Reference& r = Reference::get();
  EXPECT_STREQ(r.plugin().name, "reference");
  EXPECT_EQ(r.plugin().kind, TDM_PLUGIN_BACKEND);
  uint32_t count = 0;
  ASSERT_EQ(r.api().device_count(&count), TDM_OK);
  EXPECT_EQ(count, 1u);
  tdm_device_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(r.api().device_info(r.device(), &info), TDM_OK);
  EXPECT_STREQ(info.name, "reference:0");
  EXPECT_EQ(info.kind, TDM_DEVICE_CPU);
  EXPECT_EQ(info.host_addressable, 1);
  EXPECT_GT(info.total_memory, 0u);
  EXPECT_LE(info.free_memory, info.total_memory);
}

TEST(Device, AlignedAllocationAndStats) {
  Reference& r = Reference::get();
  tdm_memory_stats before{};
  before.struct_size = sizeof before;
  ASSERT_EQ(r.api().memory_stats(r.device(), &before), TDM_OK);
  void* p = nullptr;
  void* q = nullptr;
  ASSERT_EQ(r.api().mem_alloc(r.device(), 100, &p), TDM_OK);
  ASSERT_EQ(r.api().mem_alloc(r.device(), 28, &q), TDM_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 64, 0u);
  tdm_memory_stats during{};
  during.struct_size = sizeof during;
  ASSERT_EQ(r.api().memory_stats(r.device(), &during), TDM_OK);
  EXPECT_EQ(during.allocated, before.allocated + 128);
  EXPECT_EQ(during.allocations, before.allocations + 2);
  EXPECT_GE(during.peak_allocated, during.allocated);
  r.api().mem_free(r.device(), p);
  r.api().mem_free(r.device(), q);
  tdm_memory_stats after{};
  after.struct_size = sizeof after;
  ASSERT_EQ(r.api().memory_stats(r.device(), &after), TDM_OK);
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(after.peak_allocated, during.peak_allocated);
}

TEST(Device, HugeAllocationIsOutOfMemory) {
  Reference& r = Reference::get();
  void* p = nullptr;
  EXPECT_EQ(r.api().mem_alloc(r.device(), SIZE_MAX - 8, &p), TDM_OUT_OF_MEMORY);
  EXPECT_NE(Reference::last_error().find("bytes"), std::string::npos) << Reference::last_error();
}
