#include "data/transforms.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace tandem::host::data {
namespace {

const std::vector<int64_t> kShape = {1, 2, 3};

TEST(Transforms, NormalisePerChannel) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, scratch;
  Transforms t{.mean = {2.f}, .std = {0.5f}};
  apply_transforms(t, kShape, x, false, 0, 0, 0, scratch);
  EXPECT_EQ(x, (std::vector<float>{-2, 0, 2, 4, 6, 8}));
}

TEST(Transforms, FlipAlwaysWithProbabilityOne) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, scratch;
  apply_transforms({.horizontal_flip = 1.0}, kShape, x, true, 0, 0, 0, scratch);
  EXPECT_EQ(x, (std::vector<float>{3, 2, 1, 6, 5, 4}));
}

TEST(Transforms, NoAugmentationAtEvaluation) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, scratch;
  apply_transforms({.crop_padding = 2, .horizontal_flip = 1.0}, kShape, x, false, 0, 0, 0, scratch);
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Transforms, CropShiftsWithZeroPaddingAndIsDeterministic) {
  const std::vector<int64_t> shape = {1, 8, 8};
  std::vector<float> base(64);
  std::iota(base.begin(), base.end(), 1.f);
  std::vector<float> scratch;
  bool some_shift = false;
  for (uint64_t id = 0; id < 20; ++id) {
    std::vector<float> a = base, b = base;
    apply_transforms({.crop_padding = 2}, shape, a, true, 5, 1, id, scratch);
    apply_transforms({.crop_padding = 2}, shape, b, true, 5, 1, id, scratch);
    EXPECT_EQ(a, b);
    some_shift |= a != base;
    // A crop only moves values or brings in zeros: every value is an original or 0.
    for (float v : a) EXPECT_TRUE(v == 0.f || (v >= 1.f && v <= 64.f));
  }
  EXPECT_TRUE(some_shift);
}

}  // namespace
}  // namespace tandem::host::data
