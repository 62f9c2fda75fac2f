// The calibrators and the affine helpers on distributions whose answer is
// known: min-max exactly, percentiles to a histogram bin, the KL threshold
// below the maximum for a heavy tail and at it for a bounded uniform.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "quant/affine.hpp"
#include "quant/calibration_file.hpp"
#include "quant/calibrators.hpp"
#include "quant/observer.hpp"
#include "temp_dir.hpp"

namespace tandem::host::quant {
namespace {

Observer observe(const std::vector<float>& v, bool histograms = true) {
  Observer o;
  o.observe_range(v);
  if (histograms) {
    o.start_histograms();
    o.observe_histograms(v);
  }
  return o;
}

TEST(Calibrators, MinMaxIsExactAndZeroIsOnTheGrid) {
  const Observer o = observe({0.25f, -1.5f, 3.0f, 1.0f}, false);
  const Range r = minmax_range(o);
  EXPECT_EQ(r.lo, -1.5);
  EXPECT_EQ(r.hi, 3.0);
  const AffineU8 p = u8_params(r);
  EXPECT_EQ(p.scale, double(float(4.5 / 255)));
  EXPECT_EQ(p.zero_point, 85);  // 1.5 / (4.5/255) = 85
  // Non-negative data (after a ReLU) uses the whole grid from 0.
  const AffineU8 relu = u8_params({0.5, 2.55});
  EXPECT_EQ(relu.zero_point, 0);
  EXPECT_FLOAT_EQ(float(relu.scale), 0.01f);
  // A constant tensor still gets a usable grid.
  EXPECT_GT(u8_params({0, 0}).scale, 0);
}

TEST(Calibrators, PercentileClipsOutliers) {
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> v;
  for (int i = 0; i < 100000; ++i) v.push_back(u(gen));
  for (int i = 0; i < 20; ++i) v.push_back(100.0f);  // 0.02% outliers
  const Observer o = observe(v);
  const double bin = 100.0 / Observer::kBins;
  const Range r = percentile_range(o, 99.9);
  EXPECT_EQ(r.lo, o.min());
  EXPECT_GE(r.hi, 0.998 - bin);
  EXPECT_LE(r.hi, 1.0 + bin);
  EXPECT_EQ(percentile_range(o, 100).hi, 100.0);  // keeps everything
}

TEST(Calibrators, PercentileSplitsTheTailsOfSignedData) {
  std::mt19937 gen(2);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> v;
  for (int i = 0; i < 200000; ++i) v.push_back(n(gen));
  const Observer o = observe(v);
  const Range r = percentile_range(o, 99.0);  // 0.5% per tail: ±2.576 sigma
  const double bin = (o.max() - o.min()) / Observer::kBins;
  EXPECT_NEAR(r.hi, 2.576, 0.05 + bin);
  EXPECT_NEAR(r.lo, -2.576, 0.05 + bin);
}

TEST(Calibrators, EntropyClipsAHeavyTailButNotAUniform) {
  std::mt19937 gen(3);
  // |Cauchy|-like heavy tail: most mass below ~10, a few values in the thousands.
  std::cauchy_distribution<float> cauchy(0, 1);
  std::vector<float> heavy;
  for (int i = 0; i < 100000; ++i) heavy.push_back(std::min(std::fabs(cauchy(gen)), 5000.0f));
  const Observer h = observe(heavy);
  const Range rh = entropy_range(h);
  EXPECT_EQ(rh.lo, h.min());
  EXPECT_LT(rh.hi, 0.5 * h.max()) << "KL should clip the tail well below max " << h.max();
  EXPECT_GT(rh.hi, 2.0) << "but keep the bulk of the distribution";

  std::uniform_real_distribution<float> u(0, 4);
  std::vector<float> flat;
  for (int i = 0; i < 100000; ++i) flat.push_back(u(gen));
  const Observer f = observe(flat);
  EXPECT_GT(entropy_range(f).hi, 0.95 * f.max()) << "nothing to clip in a bounded uniform";
}

TEST(Calibrators, EntropyCalibratesEachSignSeparately) {
  // Normalised images: a spike of background at -0.8, content spread to +2.
  std::mt19937 gen(4);
  std::uniform_real_distribution<float> u(-0.8f, 2.0f);
  std::vector<float> v(50000, -0.8f);
  for (int i = 0; i < 50000; ++i) v.push_back(u(gen));
  const Observer o = observe(v);
  const Range r = entropy_range(o);
  EXPECT_NEAR(r.lo, -0.8, 1e-6);
  EXPECT_GT(r.hi, 1.9);
}

TEST(Calibrators, MethodNames) {
  EXPECT_EQ(method_name(*parse_method("entropy")), std::string("entropy"));
  EXPECT_FALSE(parse_method("kl").ok());
}

TEST(Affine, SymmetricWeightsRoundHalfToEven) {
  // Row 0: max |w| = 127 -> scale 1, so the ties 2.5, -3.5, 0.5 show the rounding.
  // Row 1: scale 0.5 / 127.
  const std::vector<float> w = {127.0f, 2.5f, -3.5f, 0.5f, 0.5f, -0.25f, 0.0f, 0.125f};
  const QuantizedWeights per_row = quantize_weights(w, 2, 4, true);
  ASSERT_EQ(per_row.scales.size(), 2u);
  EXPECT_EQ(per_row.scales[0], 1.0f);
  EXPECT_EQ(per_row.scales[1], 0.5f / 127.0f);
  const std::vector<int8_t> expected = {127, 2, -4, 0, 127, -64, 0, 32};
  EXPECT_EQ(per_row.values, expected);
  const QuantizedWeights whole = quantize_weights(w, 2, 4, false);
  ASSERT_EQ(whole.scales.size(), 1u);
  EXPECT_EQ(whole.values[4], 0);  // 0.5 / 1.0 is a tie: rounds to even 0
}

TEST(CalibrationFile, RoundTripAndErrors) {
  test::TempDir dir;
  Calibration c;
  c.model = "m.toml";
  c.calibrator = "percentile";
  c.percentile = 99.9;
  c.samples = 512;
  c.per_channel = true;
  LayerCalibration l;
  l.input = {0.02, 17};
  l.observed = {-0.3, 4.8};
  l.clipped = {-0.3, 4.0};
  l.weight_scales = {0.5f, 0.25f};
  c.layers["fc1"] = l;
  const std::string path = dir.file("calibration.json");
  ASSERT_TRUE(write_calibration(path, c).ok());
  auto back = read_calibration(path);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->calibrator, "percentile");
  EXPECT_EQ(back->samples, 512);
  EXPECT_EQ(back->layers.at("fc1").input.zero_point, 17);
  EXPECT_EQ(back->layers.at("fc1").input.scale, 0.02);
  EXPECT_EQ(back->layers.at("fc1").weight_scales, l.weight_scales);

  auto missing = read_calibration(dir.file("nope.json"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("nope.json"), std::string::npos);
  EXPECT_NE(missing.error().message.find("tandem quantize"), std::string::npos);
}

// Found by tests/fuzz (calibration_fuzzer: "version": 1.4e35;
// corpus/calibration/regression_*): nlohmann converts a float to an integer
// with a plain cast, undefined beyond the integer's range, so version,
// samples, weight_qmax and zero_point given as 1e300 were undefined
// behaviour; now an error naming the key.
TEST(CalibrationFile, IntegersGivenAsHugeFloatsAreErrors) {
  const std::string head = R"({"format": "tandem-int8-calibration", "calibrator": "minmax", )";
  const std::string layers =
      R"("layers": {"fc": {"input": {"scale": 1, "zero_point": 3}, "weight": {"scales": [1]}}})";
  const auto error_of = [](const std::string& text) {
    auto c = parse_calibration(text, "c.json");
    return c.ok() ? std::string("(read)") : c.error().message;
  };
  EXPECT_EQ(error_of(head + R"("version": 1, )" + layers + "}"), "(read)");
  EXPECT_NE(error_of(head + R"("version": 1e300, )" + layers + "}")
                .find("c.json: calibration file version 1e+300 is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"("version": 1, "samples": -1e300, )" + layers + "}")
                .find("c.json: samples -1e+300 is not a count"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"("version": 1, "weight_qmax": 1e300, )" + layers + "}")
                .find("c.json: weight_qmax 1e+300 is outside 1..127"),
            std::string::npos);
  std::string huge_zero_point = layers;
  huge_zero_point.replace(huge_zero_point.find("\"zero_point\": 3"), 15, "\"zero_point\": 1e300");
  EXPECT_NE(
      error_of(head + R"("version": 1, )" + huge_zero_point + "}")
          .find("c.json: layer 'fc': input scale must be positive and finite and zero_point within 0..255"),
      std::string::npos);
}

}  // namespace
}  // namespace tandem::host::quant
