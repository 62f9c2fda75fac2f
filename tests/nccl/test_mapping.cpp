// The NCCL plugin's dtype and reduce-op mapping, checked without a GPU.
#include <gtest/gtest.h>

#include "nccl_types.hpp"

using namespace tandem::nccl;

TEST(NcclMapping, EveryTandemDtypeHasItsNcclType) {
  EXPECT_EQ(nccl_type(TDM_F32), ncclFloat32);
  EXPECT_EQ(nccl_type(TDM_F64), ncclFloat64);
  EXPECT_EQ(nccl_type(TDM_F16), ncclFloat16);
  EXPECT_EQ(nccl_type(TDM_BF16), ncclBfloat16);
  EXPECT_EQ(nccl_type(TDM_S8), ncclInt8);
  EXPECT_EQ(nccl_type(TDM_U8), ncclUint8);
  EXPECT_EQ(nccl_type(TDM_S32), ncclInt32);
  EXPECT_EQ(nccl_type(TDM_S64), ncclInt64);
  EXPECT_FALSE(nccl_type(TDM_DTYPE_INVALID).has_value());
  EXPECT_FALSE(nccl_type(99).has_value());
}

TEST(NcclMapping, ReduceOpsIncludingNativeAverage) {
  EXPECT_EQ(nccl_op(TDM_REDUCE_SUM), ncclSum);
  EXPECT_EQ(nccl_op(TDM_REDUCE_MAX), ncclMax);
  EXPECT_EQ(nccl_op(TDM_REDUCE_MIN), ncclMin);
  EXPECT_EQ(nccl_op(TDM_REDUCE_AVG), ncclAvg);
  EXPECT_FALSE(nccl_op(4).has_value());
}

TEST(NcclMapping, VersionCodes) {
  int major = 0, minor = 0, patch = 0;
  version_parts(22809, major, minor, patch);  // 2.28.9
  EXPECT_EQ(major, 2);
  EXPECT_EQ(minor, 28);
  EXPECT_EQ(patch, 9);
  version_parts(2804, major, minor, patch);  // 2.8.4, the old encoding
  EXPECT_EQ(major, 2);
  EXPECT_EQ(minor, 8);
  EXPECT_EQ(patch, 4);
}

// ABI 1.5: the communicator goes on the GPU the host chose for the rank
// (--device cuda:1 on rank 0 puts it on GPU 1, not on GPU 0).
TEST(NcclDevice, TheHostsDeviceWinsAndIsChecked) {
  tdm_comm_init_info info{};
  info.struct_size = sizeof info;
  info.rank = 0;
  info.world_size = 2;
  info.local_rank = 0;
  info.device = 1;
  EXPECT_EQ(communicator_device(info, 2), 1);
  info.device = 2;
  try {
    communicator_device(info, 2);
    FAIL() << "GPU 2 of 2 accepted";
  } catch (const tandem::Error& e) {
    EXPECT_NE(std::string(e.what()).find("trains on GPU 2 but only 2 are visible"), std::string::npos)
        << e.what();
  }
  info.device = -1;  // host memory: the plugin chooses, as for an older host
  info.local_rank = 1;
  EXPECT_EQ(communicator_device(info, 2), 1);
}

TEST(NcclDevice, AnOlderHostLeavesTheChoiceToTheLocalRank) {
  tdm_comm_init_info info{};
  info.struct_size = TDM_STRUCT_SIZE(tdm_comm_init_info, timeout_seconds);  // ABI 1.4: no device field
  info.device = 1;                                                          // beyond struct_size: not read
  info.local_rank = 0;
  EXPECT_EQ(communicator_device(info, 2), 0);
  EXPECT_EQ(communicator_device(info, 1), 0);  // one visible GPU per process
  info.local_rank = 2;
  EXPECT_THROW(communicator_device(info, 2), tandem::Error);
}
