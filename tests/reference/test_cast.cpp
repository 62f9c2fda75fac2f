// cast: rounding to nearest-even, NaN, overflow, subnormals, saturation.
#include <cmath>
#include <cstdint>
#include <limits>

#include "expect.hpp"

using namespace ref_test;

namespace {
std::vector<uint16_t> cast16(tdm_dtype to, const std::vector<float>& values) {
  std::vector<Tensor> y = {out(to, {int64_t(values.size())})};
  auto r = run("cast", {f32({int64_t(values.size())}, values)}, y);
  EXPECT_EQ(r.status, TDM_OK) << r.message;
  return y[0].as<uint16_t>();
}
}  // namespace

TEST(Cast, F32ToBf16) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // 1+2^-8: tie → even 0x3F80; 1+3·2^-8: tie → even 0x3F82; 1+2^-8+2^-20: above tie → 0x3F81
  const auto b =
      cast16(TDM_BF16, {1.00390625f, 1.01171875f, 1.0f + 0x1p-8f + 0x1p-20f, inf, -0.0f, nan, -nan});
  EXPECT_EQ(b[0], 0x3F80);
  EXPECT_EQ(b[1], 0x3F82);
  EXPECT_EQ(b[2], 0x3F81);
  EXPECT_EQ(b[3], 0x7F80);
  EXPECT_EQ(b[4], 0x8000);
  // NaN stays NaN: exponent all ones, mantissa non-zero
  EXPECT_EQ(b[5] & 0x7F80, 0x7F80);
  EXPECT_NE(b[5] & 0x007F, 0);
  EXPECT_EQ(b[6] & 0x7F80, 0x7F80);
  EXPECT_NE(b[6] & 0x007F, 0);
  // the largest f32 rounds past bf16's largest finite value: inf
  EXPECT_EQ(cast16(TDM_BF16, {std::numeric_limits<float>::max()})[0], 0x7F80);
}

TEST(Cast, F32ToF16OverflowAndSubnormals) {
  // 65504 is the largest f16 (0x7BFF); 65520 is the tie with 65536 → even → overflows to inf
  // 2^-24 is the smallest subnormal (0x0001); 2^-25 ties with 0 → 0; 3·2^-25 = 1.5 ulp → 2 ulp
  const auto h = cast16(TDM_F16, {65504.0f, 65520.0f, 0x1p-24f, 0x1p-25f, 3 * 0x1p-25f, -1.5f});
  EXPECT_EQ(h, (std::vector<uint16_t>{0x7BFF, 0x7C00, 0x0001, 0x0000, 0x0002, 0xBE00}));
}

TEST(Cast, HalfToF32IsExact) {
  std::vector<Tensor> y = {out(TDM_F32, {3})};
  EXPECT_RUN_OK(run("cast", {bits16(TDM_F16, {3}, {0x0001, 0x7BFF, 0xFC00})}, y));
  const auto v = y[0].as<float>();
  EXPECT_EQ(v[0], 0x1p-24f);
  EXPECT_EQ(v[1], 65504.0f);
  EXPECT_EQ(v[2], -std::numeric_limits<float>::infinity());
  EXPECT_RUN_OK(run("cast", {bits16(TDM_BF16, {3}, {0x3F82, 0x0001, 0x7FC0})}, y));
  const auto w = y[0].as<float>();
  EXPECT_EQ(w[0], 1.015625f);
  EXPECT_EQ(w[1], 0x1p-133f);  // bf16 subnormal
  EXPECT_TRUE(std::isnan(w[2]));
}

TEST(Cast, FloatToIntegerRoundsAndSaturates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<Tensor> y = {out(TDM_S32, {6})};
  EXPECT_RUN_OK(run("cast", {f32({6}, {2.5f, 3.5f, -2.5f, nan, 1e10f, -1e10f})}, y));
  EXPECT_EQ(y[0].as<int32_t>(), (std::vector<int32_t>{2, 4, -2, 0, INT32_MAX, INT32_MIN}));
  std::vector<Tensor> u = {out(TDM_U8, {3})};
  EXPECT_RUN_OK(run("cast", {f32({3}, {-3.7f, 300, 127.5f})}, u));
  EXPECT_EQ(u[0].as<uint8_t>(), (std::vector<uint8_t>{0, 255, 128}));
}

TEST(Cast, IntegerToIntegerSaturates) {
  std::vector<Tensor> y = {out(TDM_S8, {3})};
  EXPECT_RUN_OK(run("cast", {s32({3}, {200, -200, 5})}, y));
  EXPECT_EQ(y[0].as<int8_t>(), (std::vector<int8_t>{127, -128, 5}));
  std::vector<Tensor> f = {out(TDM_F32, {1})};
  EXPECT_RUN_OK(run("cast", {s32({1}, {16777217})}, f));  // 2^24+1: tie → even 2^24
  EXPECT_EQ(f[0].as<float>()[0], 16777216.0f);
}
