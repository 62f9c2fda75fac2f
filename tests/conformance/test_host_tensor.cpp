// Host tensors: 16-bit float conversions (round to nearest even), fills.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tandem/conformance/host_tensor.hpp"

namespace tc = tandem::conformance;

TEST(HostTensor, Bf16RoundsToNearestEven) {
  EXPECT_EQ(tc::f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (down).
  EXPECT_EQ(tc::f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3·2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: up to even.
  EXPECT_EQ(tc::f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(tc::f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above the tie
  EXPECT_TRUE(std::isnan(tc::bf16_to_f32(tc::f32_to_bf16(std::nanf("")))));
  EXPECT_EQ(tc::bf16_to_f32(0xc0a0), -5.0f);
}

TEST(HostTensor, F16RoundsToNearestEven) {
  EXPECT_EQ(tc::f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(tc::f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(tc::f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(tc::f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(tc::f32_to_f16(65520.0f), 0x7c00);             // tie rounds to even: infinity
  EXPECT_EQ(tc::f32_to_f16(1.0f + 0x1p-11f), 0x3c00);      // tie, down to even
  EXPECT_EQ(tc::f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie, up to even
  EXPECT_EQ(tc::f32_to_f16(0x1p-24f), 0x0001);             // smallest subnormal
  EXPECT_EQ(tc::f32_to_f16(0x1p-25f), 0x0000);             // tie with zero: even
  EXPECT_EQ(tc::f32_to_f16(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(tc::f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(tc::f16_to_f32(0x7c00), INFINITY);
  for (uint32_t h = 0; h < 0x7c00; ++h)  // every finite f16 survives a round trip
    ASSERT_EQ(tc::f32_to_f16(tc::f16_to_f32(uint16_t(h))), h);
}

TEST(HostTensor, ValuesRoundTrip) {
  tc::HostTensor t(TDM_BF16, {3});
  t.set(0, 3.14159);
  EXPECT_EQ(t.get(0), 3.140625);  // nearest bf16
  tc::HostTensor s(TDM_S32, {2});
  s.set(1, -7);
  EXPECT_EQ(s.get(1), -7);
  EXPECT_EQ(s.size_bytes(), 8u);
  EXPECT_EQ(t.cast(TDM_F32).get(0), 3.140625);
}

TEST(HostTensor, FillsAreDeterministicAndMeaningful) {
  tc::Rng a(42), b(42);
  const tc::TensorShape shape(TDM_BF16, {2, 3, 9, 9});
  const tc::HostTensor x = tc::HostTensor::random(shape, tc::Fill::no_ties(), a);
  EXPECT_TRUE(x.bitwise_equal(tc::HostTensor::random(shape, tc::Fill::no_ties(), b)));
  for (int64_t plane = 0; plane < 6; ++plane) {  // no ties within a plane, even in bf16
    std::vector<double> v;
    for (int64_t i = 0; i < 81; ++i) v.push_back(x.get(plane * 81 + i));
    std::sort(v.begin(), v.end());
    EXPECT_EQ(std::adjacent_find(v.begin(), v.end()), v.end());
  }
  tc::Rng r(1);
  const tc::HostTensor labels = tc::HostTensor::random({TDM_S32, {100}}, tc::Fill::ints(0, 9), r);
  for (int64_t i = 0; i < 100; ++i) EXPECT_TRUE(labels.get(i) >= 0 && labels.get(i) <= 9);
  const tc::HostTensor pos = tc::HostTensor::random({TDM_F32, {100}}, tc::Fill::positive(), r);
  for (int64_t i = 0; i < 100; ++i) EXPECT_GT(pos.get(i), 0);
}
