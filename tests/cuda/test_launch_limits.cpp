// Sizes the cuda plugin declines at prepare instead of failing at launch:
// one block per row beyond CUDA's grid, cuBLAS's and cuDNN's int
// parameters, positions a sort carries as int (host code, no GPU needed).
#include <gtest/gtest.h>

#include "launch_limits.hpp"

namespace tandem::cuda {
namespace {

#define EXPECT_MENTIONS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing '" << (part) << "' in: " << (text)

constexpr int64_t k2to31 = int64_t(1) << 31;

TEST(LaunchLimits, OneBlockPerRowFitsTheGridUpTo2To31Minus1) {
  EXPECT_EQ(one_block_per_limit(0, "row"), "");
  EXPECT_EQ(one_block_per_limit(k2to31 - 1, "row"), "");
  const std::string why = one_block_per_limit(k2to31, "row");
  EXPECT_MENTIONS(why, "2147483648 rows");
  EXPECT_MENTIONS(why, "2147483647 blocks");
  EXPECT_MENTIONS(why, "place this layer on the CPU");
  EXPECT_MENTIONS(one_block_per_limit(int64_t(3) << 31, "channel"), "channels");
}

TEST(LaunchLimits, GemmNamesTheDimensionBeyondCublasInts) {
  EXPECT_EQ(gemm_limit(k2to31 - 1, 1, 0, 1), "");
  EXPECT_MENTIONS(gemm_limit(k2to31, 1, 1, 1), "GEMM M = 2147483648");
  EXPECT_MENTIONS(gemm_limit(1, k2to31, 1, 1), "GEMM N = ");
  EXPECT_MENTIONS(gemm_limit(1, 1, k2to31, 1), "GEMM K = ");
  EXPECT_MENTIONS(gemm_limit(1, 1, 1, k2to31), "GEMM batch = ");
}

TEST(LaunchLimits, CudnnDescriptorsAddressAtMost2To31Minus1Elements) {
  EXPECT_EQ(cudnn_tensor_limit({k2to31 - 1, 1, 1}), "");
  // A [1024, 64, 256, 128] activation: 2^31 elements.
  const std::string why = cudnn_tensor_limit({1, int64_t(1024) * 64 * 256 * 128, 1});
  EXPECT_MENTIONS(why, "2147483648 elements");
  EXPECT_MENTIONS(why, "cuDNN");
}

TEST(LaunchLimits, SortedPositionsFitAnInt) {
  EXPECT_EQ(int_positions_limit(0, "indices"), "");
  EXPECT_EQ(int_positions_limit(k2to31 - 1, "indices"), "");
  const std::string why = int_positions_limit(k2to31, "indices");
  EXPECT_MENTIONS(why, "2147483648 indices");
  EXPECT_MENTIONS(why, "place this layer on the CPU");
}

}  // namespace
}  // namespace tandem::cuda
