// half.hpp through the cast op, checked against independent references:
// every bf16/f16 pattern round-trips; f32 -> bf16 matches the well-known
// integer rounding trick; f32 -> f16 matches the compiler's _Float16.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "expect.hpp"

using namespace ref_test;

namespace {
std::vector<uint16_t> all_patterns() {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = uint16_t(i);
  return v;
}
bool is_nan16(uint16_t b, int mantissa_bits) {
  const uint16_t exp_mask = uint16_t(0x7FFF & ~((1u << mantissa_bits) - 1));
  return (b & exp_mask) == exp_mask && (b & ((1u << mantissa_bits) - 1)) != 0;
}
std::vector<float> random_floats(size_t n) {
  std::mt19937 rng(1234);
  std::vector<float> v(n);
  for (float& f : v) {
    const uint32_t bits = rng();
    std::memcpy(&f, &bits, sizeof f);
  }
  return v;
}
}  // namespace

TEST(Half, EveryPatternRoundTrips) {
  for (tdm_dtype dt : {TDM_BF16, TDM_F16}) {
    const int mbits = dt == TDM_BF16 ? 7 : 10;
    std::vector<Tensor> wide = {out(TDM_F32, {65536})};
    EXPECT_RUN_OK(run("cast", {bits16(dt, {65536}, all_patterns())}, wide));
    std::vector<Tensor> back = {out(dt, {65536})};
    EXPECT_RUN_OK(run("cast", {wide[0]}, back));
    const auto b = back[0].as<uint16_t>();
    for (uint32_t i = 0; i < 65536; ++i) {
      if (is_nan16(uint16_t(i), mbits))
        EXPECT_TRUE(is_nan16(b[i], mbits)) << std::hex << i;
      else
        ASSERT_EQ(b[i], i) << "dtype " << dt << " pattern 0x" << std::hex << i;
    }
  }
}

TEST(Half, F32ToBf16MatchesIntegerTrick) {
  const std::vector<float> x = random_floats(200000);
  std::vector<Tensor> y = {out(TDM_BF16, {int64_t(x.size())})};
  EXPECT_RUN_OK(run("cast", {f32({int64_t(x.size())}, x)}, y));
  const auto b = y[0].as<uint16_t>();
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof bits);
    if (std::isnan(x[i])) {
      EXPECT_TRUE(is_nan16(b[i], 7));
      continue;
    }
    const uint16_t expected = uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);  // RNE
    ASSERT_EQ(b[i], expected) << "x = " << x[i];
  }
}

#if defined(__FLT16_MAX__)
TEST(Half, F32ToF16MatchesCompiler) {
  std::vector<float> x = random_floats(100000);
  // Also values in f16's own range, where most of its bits matter.
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> range(-70000.0f, 70000.0f), tiny(-1e-4f, 1e-4f);
  for (int i = 0; i < 100000; ++i) x.push_back(i % 2 ? range(rng) : tiny(rng));
  std::vector<Tensor> y = {out(TDM_F16, {int64_t(x.size())})};
  EXPECT_RUN_OK(run("cast", {f32({int64_t(x.size())}, x)}, y));
  const auto b = y[0].as<uint16_t>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) continue;
    const _Float16 h = static_cast<_Float16>(x[i]);
    uint16_t expected;
    std::memcpy(&expected, &h, sizeof expected);
    ASSERT_EQ(b[i], expected) << "x = " << x[i];
  }
}
#endif
