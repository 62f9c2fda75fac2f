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
  EXPECT_STREQ(op_name(TDM_REDUCE_AVG), "AVG");
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
