// The CUDA kernels' per-element math, run on the CPU (plugins/cuda/math):
// the same inline functions the GPU executes, checked against closed forms,
// hand-computed values and the catalog's formulas, and the SDK's f16/bf16
// conversions (tandem/half.hpp) they store with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "math/activation.hpp"
#include "math/attention.hpp"
#include "math/common.hpp"
#include "math/dropout.hpp"
#include "math/optim.hpp"
#include "math/rope.hpp"
#include "math/softmax.hpp"
#include "tandem/conformance/cases.hpp"
#include "tandem/op_catalog.hpp"

namespace m = tandem::cuda::math;

namespace {

// Exact nearest-even rounding of a float to `mant` fraction bits, in double,
// for an independent check of the bit-level conversions.
double round_to_bits(double v, int mant) {
  int e = 0;
  std::frexp(v, &e);
  const double ulp = std::ldexp(1.0, e - 1 - mant);
  return std::nearbyint(v / ulp) * ulp;  // default rounding mode: nearest-even
}

}  // namespace

TEST(Bf16, KnownValuesAndTiesToEven) {
  EXPECT_EQ(tandem::f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(tandem::f32_to_bf16(-2.0f), 0xc000);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(tandem::f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3·2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: rounds up to even.
  EXPECT_EQ(tandem::f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(tandem::f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above halfway
  EXPECT_EQ(tandem::f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(tandem::bf16_to_f32(tandem::f32_to_bf16(std::nanf("")))));
  EXPECT_EQ(tandem::f32_to_bf16(3.3895314e38f), 0x7f7f);  // largest finite bf16 stays finite
}

TEST(Bf16, MatchesExactRoundingOnASweep) {
  for (double v = 1e-30; v < 1e30; v *= 1.0137) {
    const float f = static_cast<float>(v);
    EXPECT_EQ(tandem::bf16_to_f32(tandem::f32_to_bf16(f)), static_cast<float>(round_to_bits(f, 7))) << f;
  }
}

TEST(F16, KnownValues) {
  EXPECT_EQ(tandem::f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(tandem::f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(tandem::f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(tandem::f32_to_f16(65519.0f), 0x7bff);         // below the midpoint to 2^16
  EXPECT_EQ(tandem::f32_to_f16(65520.0f), 0x7c00);         // the midpoint rounds to even: infinity
  EXPECT_EQ(tandem::f32_to_f16(0x1p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(tandem::f32_to_f16(0x1p-25f), 0x0000);         // half of it: tie to even (0)
  EXPECT_EQ(tandem::f32_to_f16(0x1.8p-24f), 0x0002);       // 1.5 units: tie to even (2)
  EXPECT_EQ(tandem::f32_to_f16(0x1p-14f), 0x0400);         // smallest normal
  EXPECT_EQ(tandem::f32_to_f16(1.0f + 0x1p-11f), 0x3c00);  // tie to even
  EXPECT_EQ(tandem::f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(tandem::f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(tandem::f32_to_f16(std::nanf("")) & 0x7e00, 0x7e00);
  EXPECT_FLOAT_EQ(tandem::f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_FLOAT_EQ(tandem::f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isinf(tandem::f16_to_f32(0xfc00)));
}

TEST(F16, RoundTripsEveryHalfAndMatchesExactRounding) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = tandem::f16_to_f32(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(tandem::f32_to_f16(f), h) << std::hex << b;
  }
  for (double v = 6e-8; v < 65000; v *= 1.00731) {
    const float f = static_cast<float>(v);
    const double mag = std::fabs(f);
    // Below 2^-14 the spacing is fixed at 2^-24.
    const double expected = mag < 0x1p-14 ? std::nearbyint(mag / 0x1p-24) * 0x1p-24 : round_to_bits(mag, 10);
    EXPECT_EQ(tandem::f16_to_f32(tandem::f32_to_f16(f)), static_cast<float>(expected)) << f;
  }
}

TEST(Activation, ForwardClosedForms) {
  for (float x : {-3.0f, -0.5f, 0.0f, 0.25f, 2.0f}) {
    EXPECT_FLOAT_EQ(m::relu(x), x > 0 ? x : 0.0f);
    EXPECT_FLOAT_EQ(m::leaky_relu(x, 0.2f), x > 0 ? x : 0.2f * x);
    EXPECT_FLOAT_EQ(m::activate(m::Act::LeakyRelu, x, 0.2f), m::leaky_relu(x, 0.2f));
    EXPECT_NEAR(m::sigmoid(x), 1.0 / (1.0 + std::exp(-double(x))), 1e-7);
    EXPECT_NEAR(m::gelu(x), 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))), 1e-6);
    const double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    EXPECT_NEAR(m::gelu_tanh(x), 0.5 * x * (1.0 + std::tanh(inner)), 1e-6);
  }
  // No overflow on either side: e^-100 stays a tiny (subnormal) float.
  EXPECT_NEAR(m::sigmoid(-100.0f), std::exp(-100.0), 1e-45);
  EXPECT_FLOAT_EQ(m::sigmoid(100.0f), 1.0f);
  EXPECT_FALSE(std::isnan(m::sigmoid(-1000.0f)));
}

TEST(Activation, GradientsMatchCentralDifferences) {
  const double h = 1e-3;
  for (float x : {-2.5f, -0.7f, 0.3f, 1.9f}) {
    auto fd = [&](float (*f)(float)) {
      return (double(f(x + float(h))) - double(f(x - float(h)))) / (2 * h);
    };
    EXPECT_NEAR(m::gelu_grad(1.0f, x), fd(m::gelu), 2e-3);
    EXPECT_NEAR(m::gelu_tanh_grad(1.0f, x), fd(m::gelu_tanh), 2e-3);
    // tanh/sigmoid gradients take the forward output y.
    EXPECT_NEAR(m::tanh_grad(1.0f, m::tanh_act(x)), fd(m::tanh_act), 2e-3);
    EXPECT_NEAR(m::sigmoid_grad(1.0f, m::sigmoid(x)), fd(m::sigmoid), 2e-3);
    EXPECT_FLOAT_EQ(m::relu_grad(2.0f, x), x > 0 ? 2.0f : 0.0f);
    EXPECT_NEAR(
        m::leaky_relu_grad(1.0f, x, 0.2f),
        (double(m::leaky_relu(x + float(h), 0.2f)) - double(m::leaky_relu(x - float(h), 0.2f))) / (2 * h),
        2e-3);
    EXPECT_FLOAT_EQ(m::activate_grad(m::Act::LeakyRelu, 2.0f, x, 0.2f), x > 0 ? 2.0f : 0.4f);
  }
  EXPECT_FLOAT_EQ(m::relu_grad(1.0f, 0.0f), 0.0f);  // relu'(0) = 0
  EXPECT_FLOAT_EQ(m::activate_grad(m::Act::Sigmoid, 3.0f, 0.5f), 0.75f);
}

// Every activation the backend registers (math::kActivations), with its
// catalog attributes' defaults and variants as parameters: activate_grad is
// the central difference of activate, given x or the forward output y as the
// catalog's gradient op reads it. An activation added there is checked here
// without a line of its own.
TEST(Activation, EveryRegisteredGradientIsTheDerivativeOfItsForward) {
  const double h = 1e-3;
  for (const m::NamedAct& named : m::kActivations) {
    const tandem::catalog::Op* op = tandem::catalog::find(named.op);
    ASSERT_NE(op, nullptr) << named.op << " is not a catalog op";
    const bool from_y = tandem::catalog::find(op->grad_ops.at(0))->inputs.at(1).name == "y";
    for (const tandem::conformance::Attrs& attrs : tandem::conformance::activation_attr_variants(*op)) {
      float p[2] = {0, 0};
      size_t n = 0;
      for (const tandem::catalog::Attribute& a : op->attrs)
        if (a.type == TDM_ATTR_FLOAT && n < 2) p[n++] = float(attrs.number_or(a.name, a.float_default));
      const m::Act act = named.act == m::Act::Gelu && attrs.string_or("approximate", "none") == "tanh"
                             ? m::Act::GeluTanh
                             : named.act;
      for (float x : {-2.5f, -0.7f, 0.3f, 1.9f, 3.1f}) {
        SCOPED_TRACE(std::string(named.op) + " " + attrs.str() + " x=" + std::to_string(x));
        const auto f = [&](float v) { return double(m::activate(act, v, p[0], p[1])); };
        const double fd = (f(x + float(h)) - f(x - float(h))) / (2 * h);
        const float v = from_y ? m::activate(act, x, p[0], p[1]) : x;
        EXPECT_NEAR(m::activate_grad(act, 1.0f, v, p[0], p[1]), fd, 2e-3 * std::max(1.0, std::abs(fd)));
      }
    }
  }
}

// softplus against torch's formula in double, both sides of the threshold,
// and without overflow far below and above it.
TEST(Activation, SoftplusMatchesTheCatalogInDouble) {
  for (const float beta : {1.0f, 2.0f, 0.25f})
    for (const float threshold : {20.0f, 1.0f})
      for (float x : {-30.0f, -2.0f, -0.3f, 0.0f, 0.4f, 0.9f, 3.0f, 80.0f}) {
        const double z = double(beta) * x;
        const double want = z > threshold ? x : std::log1p(std::exp(z)) / beta;
        const double slope = z > threshold ? 1.0 : 1.0 / (1.0 + std::exp(-z));
        EXPECT_NEAR(m::softplus(x, beta, threshold), want, 1e-6 * std::max(1.0, std::abs(want))) << x;
        EXPECT_NEAR(m::softplus_grad(2.0f, x, beta, threshold), 2.0 * slope, 1e-6) << x;
      }
  EXPECT_FALSE(std::isinf(m::softplus(200.0f, 1.0f, 1e9f)));  // past exp's range, still finite
}

TEST(Activation, SiluAndItsGradientMatchTheCatalogInDouble) {
  for (float x : {-30.0f, -4.0f, -1.3f, -0.2f, 0.0f, 0.4f, 2.2f, 9.0f, 30.0f}) {
    const double s = 1.0 / (1.0 + std::exp(-double(x)));
    EXPECT_NEAR(m::silu(x), x * s, 1e-6 * (1 + std::fabs(x))) << x;
    EXPECT_NEAR(m::silu_grad(0.7f, x), 0.7 * s * (1 + x * (1 - s)), 1e-6) << x;
    EXPECT_FLOAT_EQ(m::activate(m::Act::Silu, x), m::silu(x));
    EXPECT_FLOAT_EQ(m::activate_grad(m::Act::Silu, 0.7f, x), m::silu_grad(0.7f, x));
  }
  const double h = 1e-3;
  for (float x : {-2.5f, -0.7f, 0.3f, 1.9f})
    EXPECT_NEAR(m::silu_grad(1.0f, x),
                (double(m::silu(x + float(h))) - double(m::silu(x - float(h)))) / (2 * h), 2e-3);
  // No overflow far out: silu(-1000) is -0 (x times a zero sigmoid), not NaN.
  EXPECT_EQ(m::silu(-1000.0f), 0.0f);
  EXPECT_FLOAT_EQ(m::silu(1000.0f), 1000.0f);
  EXPECT_EQ(m::silu_grad(1.0f, -1000.0f), 0.0f);
}

TEST(Rope, AnglesStayAccurateAtLongPositions) {
  // The catalog's angle, p·base^(−2i/D), in double; f32 sin/cos of the
  // reduced angle must stay within a few f32 ulps of the exact values even
  // where p·freq in f32 would be off by ~p·6e-8 rad.
  for (double base : {10000.0, 500.0})
    for (int64_t D : {2, 64, 128}) {
      const int64_t half = D / 2;
      tandem::RopeFrequency frequency;
      frequency.base = base;
      for (int64_t p : {int64_t(0), int64_t(1), int64_t(7), int64_t(2047), int64_t(65537), int64_t(1) << 20,
                        (int64_t(1) << 20) + 12345, int64_t(-300)})
        for (int64_t i = 0; i < half; i += (half > 8 ? 5 : 1)) {
          const double theta = double(p) * std::pow(base, -2.0 * double(i) / double(D));
          EXPECT_NEAR(m::rope_angle(p, i, half, frequency), theta, 1e-13 * (1 + std::fabs(theta)));
          float c = 0, s = 0;
          m::rope_cos_sin(m::rope_angle(p, i, half, frequency), c, s);
          EXPECT_NEAR(c, std::cos(theta), 2e-7) << p << " " << i;
          EXPECT_NEAR(s, std::sin(theta), 2e-7) << p << " " << i;
        }
    }
}

TEST(Rope, RotationIsTheCatalogsAndTheGradientInvertsIt) {
  const double theta = 0.83;
  const float c = float(std::cos(theta)), s = float(std::sin(theta));
  float lo = 0, hi = 0;
  m::rope_rotate(1.5f, -0.25f, c, s, lo, hi);
  EXPECT_NEAR(lo, 1.5 * std::cos(theta) + 0.25 * std::sin(theta), 1e-6);
  EXPECT_NEAR(hi, -0.25 * std::cos(theta) + 1.5 * std::sin(theta), 1e-6);
  float back_lo = 0, back_hi = 0;
  m::rope_rotate(lo, hi, c, -s, back_lo, back_hi);  // rope_grad: the rotation by −θ
  EXPECT_NEAR(back_lo, 1.5, 1e-6);
  EXPECT_NEAR(back_hi, -0.25, 1e-6);
}

TEST(Attention, AllowedKeysFollowPaddingAndBottomRightCausality) {
  for (int64_t T : {1, 3, 5})
    for (int64_t S : {1, 3, 5})
      for (int64_t t = 0; t < T; ++t)
        for (int64_t s = 0; s < S; ++s) {
          EXPECT_TRUE(m::attention_allowed(false, false, t, s, T, S));
          EXPECT_FALSE(m::attention_allowed(true, false, t, s, T, S));
          EXPECT_FALSE(m::attention_allowed(true, true, t, s, T, S));
          // The last query sees every key; each earlier one a key less.
          EXPECT_EQ(m::attention_allowed(false, true, t, s, T, S), S - 1 - s >= T - 1 - t)
              << T << S << t << s;
        }
  EXPECT_EQ(m::attention_flat_index(1, 2, 3, 4, 5, 6, 7), uint64_t(((1 * 5 + 2) * 6 + 3) * 7 + 4));
}

TEST(Attention, DropoutFactorIsTheCatalogMask) {
  // Seed 0, element 0 draws u = 0.8833108 (sdk/ops.md, dropout).
  EXPECT_EQ(m::attention_dropout(0, 0, 0.88f, 8.0f), 8.0f);
  EXPECT_EQ(m::attention_dropout(0, 0, 0.89f, 9.0f), 0.0f);
  const float p = 0.2f, inv = float(1 / (1 - 0.2));
  int kept = 0;
  for (uint64_t i = 0; i < 20000; ++i) {
    const float d = m::attention_dropout(977, i, p, inv);
    EXPECT_EQ(d, tandem::dropout_keep(977, i, p) ? inv : 0.0f);
    kept += d != 0 ? 1 : 0;
  }
  EXPECT_NEAR(kept / 20000.0, 0.8, 0.01);
  EXPECT_EQ(m::attention_dropout(5, 17, 0.0f, 1.0f), 1.0f);  // p = 0 keeps everything
}

namespace {

// A row of scores (−inf = a key not allowed) fed to the online softmax in
// tiles of `tile`, as a kernel does: returns lse and Σ p·v.
void online_row(const std::vector<float>& score, const std::vector<float>& v, size_t tile, float& lse,
                float& o) {
  float mx = -INFINITY, l = 0, acc = 0;
  for (size_t s0 = 0; s0 < score.size(); s0 += tile) {
    const size_t end = std::min(score.size(), s0 + tile);
    float tile_max = -INFINITY;
    for (size_t s = s0; s < end; ++s) tile_max = std::fmax(tile_max, score[s]);
    const float m_new = std::fmax(mx, tile_max), alpha = m::online_rescale(mx, m_new);
    float sum = 0, pv = 0;
    for (size_t s = s0; s < end; ++s) {
      const float p = m::online_prob(score[s], m_new);
      sum += p, pv += p * v[s];
    }
    l = l * alpha + sum, acc = acc * alpha + pv, mx = m_new;
  }
  lse = m::online_lse(mx, l);
  o = l > 0 ? acc / l : 0.0f;
}

}  // namespace

TEST(Attention, OnlineSoftmaxMatchesTheDirectFormulaInDouble) {
  const float ninf = -INFINITY;
  const std::vector<std::vector<float>> rows = {
      {0.5f, -1.0f, 2.0f, 0.0f, 3.5f, -2.0f, 1.0f},
      {ninf, ninf, ninf, 1.0f, -3.0f, 8.0f, 0.25f},     // a leading tile with nothing allowed
      {-20.0f, ninf, 40.0f, ninf, 39.0f, -5.0f, ninf},  // the maximum grows by a lot between tiles
      {7.0f},
  };
  for (const auto& score : rows)
    for (size_t tile : {size_t(1), size_t(2), size_t(3), size_t(32)}) {
      std::vector<float> v(score.size());
      for (size_t s = 0; s < v.size(); ++s) v[s] = std::sin(1.7f * float(s)) * 2;
      double mx = -INFINITY;
      for (float x : score) mx = std::fmax(mx, x);
      double sum = 0, pv = 0;
      for (size_t s = 0; s < score.size(); ++s)
        sum += std::exp(score[s] - mx), pv += std::exp(score[s] - mx) * v[s];
      float lse = 0, o = 0;
      online_row(score, v, tile, lse, o);
      EXPECT_NEAR(lse, mx + std::log(sum), 1e-5 * (1 + std::fabs(mx)));
      EXPECT_NEAR(o, pv / sum, 1e-5);
      // The gradient's probabilities from the saved lse sum to one.
      double total = 0;
      for (float x : score) total += m::attention_prob(x, lse, x != ninf);
      EXPECT_NEAR(total, 1.0, 1e-5);
    }
  // No allowed key at all: lse = −inf and o = 0, never NaN.
  float lse = 0, o = 1;
  online_row({ninf, ninf, ninf}, {1.0f, 2.0f, 3.0f}, 2, lse, o);
  EXPECT_EQ(lse, ninf);
  EXPECT_EQ(o, 0.0f);
  EXPECT_EQ(m::attention_prob(ninf, ninf, false), 0.0f);
  EXPECT_EQ(m::attention_prob(0.5f, ninf, true), 0.0f);  // a row that attended nothing
}

TEST(Attention, DsOfARowWithoutDropoutSumsToZero) {
  // ds_s = p_s·(dp_s − Δ) with Δ = Σ p·dp: the softmax Jacobian, whose
  // rows sum to zero.
  const double p[4] = {0.1, 0.2, 0.3, 0.4}, dp[4] = {1.0, -2.0, 0.5, 3.0};
  double delta = 0;
  for (int s = 0; s < 4; ++s) delta += p[s] * dp[s];
  double total = 0;
  for (int s = 0; s < 4; ++s) {
    const float ds = m::attention_ds(float(p[s]), 1.0f, float(dp[s]), float(delta));
    EXPECT_NEAR(ds, p[s] * (dp[s] - delta), 1e-6);
    total += ds;
  }
  EXPECT_NEAR(total, 0.0, 1e-6);
  EXPECT_NEAR(m::attention_ds(0.25f, 1.25f, 2.0f, 0.5f), 0.25 * (1.25 * 2.0 - 0.5), 1e-6);
}

TEST(Dropout, HashMatchesTheFormulaAndKnownValues) {
  // SplitMix64 of the catalog, written out independently.
  auto formula = [](uint64_t seed, uint64_t i) {
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (z ^ (z >> 31)) >> 40;
  };
  for (uint64_t seed : {0ull, 1ull, 42ull, 0xdeadbeefcafeull})
    for (uint64_t i = 0; i < 1000; ++i) EXPECT_EQ(m::dropout_draw(seed, i), formula(seed, i));
  // SplitMix64 with state 0: its first output is 0xE220A8397B1DCDAF (the
  // published test vector), so element 0 of seed 0 draws its top 24 bits.
  EXPECT_EQ(m::splitmix64(0, 0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(m::dropout_draw(0, 0), 0xE220A8u);
}

TEST(Dropout, IntegerThresholdEqualsTheDoubleComparison) {
  for (double p : {0.0, 0.1, 0.25, 0.5, 0.3333333, 0.9, 1.0}) {
    const uint32_t t = m::dropout_threshold(p);
    for (uint64_t i = 0; i < 5000; ++i) {
      const double u = double(m::dropout_draw(7, i)) * 0x1p-24;
      EXPECT_EQ(m::dropout_keep(7, i, t), u >= p) << p << " " << i;
    }
  }
  EXPECT_FLOAT_EQ(m::dropout_apply(3.0f, true, 0.75f), 4.0f);
  EXPECT_FLOAT_EQ(m::dropout_apply(3.0f, false, 0.75f), 0.0f);
}

TEST(Dropout, KeepRateIsAboutOneMinusP) {
  const uint32_t t = m::dropout_threshold(0.3);
  int kept = 0;
  for (uint64_t i = 0; i < 100000; ++i) kept += m::dropout_keep(123, i, t) ? 1 : 0;
  EXPECT_NEAR(kept / 100000.0, 0.7, 0.01);
}

TEST(Optim, SgdStepsMatchHandFormulas) {
  const auto plain = m::sgd_params(0.0, 0.0, 0.1, false);
  float p = 2.0f;
  m::sgd_step(plain, 0.5f, p, 1.0f, nullptr);
  EXPECT_FLOAT_EQ(p, 2.0f - 0.5f * (1.0f + 0.1f * 2.0f));

  const auto mom = m::sgd_params(0.9, 0.1, 0.0, false);
  float q = 1.0f, buf = 2.0f;
  m::sgd_step(mom, 0.1f, q, 0.5f, &buf);
  EXPECT_FLOAT_EQ(buf, 0.9f * 2.0f + 0.9f * 0.5f);
  EXPECT_FLOAT_EQ(q, 1.0f - 0.1f * buf);

  const auto nes = m::sgd_params(0.9, 0.0, 0.0, true);
  float r = 1.0f, b2 = 1.0f;
  m::sgd_step(nes, 0.1f, r, 0.5f, &b2);
  EXPECT_FLOAT_EQ(b2, 0.9f + 0.5f);
  EXPECT_FLOAT_EQ(r, 1.0f - 0.1f * (0.5f + 0.9f * 1.4f));
}

TEST(Optim, AdamwFirstStepMovesByAboutLr) {
  const auto a = m::adamw_params(0.9, 0.999, 1e-8, 0.01);
  const auto bc = m::bias_correction(a, 1);
  EXPECT_FLOAT_EQ(bc.c1, 0.1f);
  EXPECT_NEAR(bc.c2, 0.001f, 1e-9);
  float p = 1.0f, mm = 0.0f, vv = 0.0f;
  m::adamw_step(a, bc, 0.01f, p, 0.5f, mm, vv);
  EXPECT_FLOAT_EQ(mm, 0.05f);
  EXPECT_FLOAT_EQ(vv, 0.001f * 0.25f);
  // p·(1 - lr·wd) - lr·m̂/(sqrt(v̂)+eps) with m̂ = 0.5, v̂ = 0.25.
  EXPECT_NEAR(p, 1.0 * (1 - 0.01 * 0.01) - 0.01 * 0.5 / (0.5 + 1e-8), 1e-6);
}

TEST(Optim, AdamwMatchesADoubleReferenceOverSteps) {
  const auto a = m::adamw_params(0.9, 0.999, 1e-8, 0.1);
  float p = 0.3f, mm = 0.0f, vv = 0.0f;
  double pd = 0.3, md = 0.0, vd = 0.0;
  for (int t = 1; t <= 20; ++t) {
    const double g = std::sin(t * 0.7);
    m::adamw_step(a, m::bias_correction(a, t), 0.001f, p, float(g), mm, vv);
    pd *= 1 - 0.001 * 0.1;
    md = 0.9 * md + 0.1 * g;
    vd = 0.999 * vd + 0.001 * g * g;
    pd -= 0.001 * (md / (1 - std::pow(0.9, t))) / (std::sqrt(vd / (1 - std::pow(0.999, t))) + 1e-8);
  }
  EXPECT_NEAR(p, pd, 1e-6);
}

TEST(SoftmaxCe, RowLossAndGradientMatchDirectFormulas) {
  const float x[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  const int C = 4, label = 2;
  for (float eps : {0.0f, 0.1f}) {
    double mx = 3.0, se = 0.0, sum = 0.0;
    for (float v : x) se += std::exp(v - mx), sum += v;
    const double lse = std::log(se);
    double loss = 0.0;
    for (int c = 0; c < C; ++c) {
      const double logp = x[c] - mx - lse;
      loss += -logp * (eps / C + (c == label ? 1.0 - eps : 0.0));
    }
    EXPECT_NEAR(m::ce_row_loss(x[label], float(mx), float(lse), float(sum), C, eps), loss, 1e-6);
    double gsum = 0.0;
    for (int c = 0; c < C; ++c) {
      const double p = std::exp(x[c] - mx - lse);
      const double g = 0.5 * (p - (c == label ? 1.0 - eps : 0.0) - eps / C);
      EXPECT_NEAR(m::ce_grad(x[c], float(mx), float(lse), c == label, C, eps, 0.5f), g, 1e-6);
      gsum += m::ce_grad(x[c], float(mx), float(lse), c == label, C, eps, 0.5f);
    }
    EXPECT_NEAR(gsum, 0.0, 1e-6);  // a softmax gradient row sums to zero
  }
}

TEST(SoftmaxCe, SoftmaxGradientsMatchTheJacobian) {
  const float y[3] = {0.2f, 0.3f, 0.5f}, dy[3] = {1.0f, -1.0f, 0.5f};
  float dot = 0.0f;
  for (int j = 0; j < 3; ++j) dot += dy[j] * y[j];
  for (int i = 0; i < 3; ++i) {
    double expected = 0.0;  // Σ_j dy_j · y_j(δ_ij - y_i)
    for (int j = 0; j < 3; ++j) expected += dy[j] * y[j] * ((i == j ? 1.0 : 0.0) - y[i]);
    EXPECT_NEAR(m::softmax_grad(dy[i], y[i], dot), expected, 1e-6);
  }
  EXPECT_NEAR(m::log_softmax_grad(1.0f, std::log(0.25f), 2.0f), 1.0 - 0.25 * 2.0, 1e-6);
}
