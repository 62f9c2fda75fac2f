// Which cuDNN convolution algorithm the cuda plugin takes
// (plugins/cuda/math/conv_algorithm.hpp): the rule over the heuristic's
// answers, run on the CPU with made-up answers, and the option parsers.
#include <gtest/gtest.h>

#include "math/conv_algorithm.hpp"

namespace m = tandem::cuda::math;

namespace {

constexpr size_t kMiB = size_t(1) << 20;

m::ConvAlgorithmCandidate algo(int id, bool deterministic, size_t workspace, bool usable = true) {
  m::ConvAlgorithmCandidate c;
  c.algo = id, c.deterministic = deterministic, c.workspace = workspace, c.usable = usable;
  return c;
}

m::ConvAlgorithmOptions options(m::Determinism d, size_t limit) {
  m::ConvAlgorithmOptions o;
  o.determinism = d, o.workspace_limit = limit;
  return o;
}

}  // namespace

TEST(ConvAlgorithm, PreferTakesTheFirstDeterministicThatFitsInTheHeuristicsOrder) {
  // Fastest first: a non-deterministic one, a deterministic one too large, then two that fit.
  const std::vector<m::ConvAlgorithmCandidate> c = {algo(1, false, 0), algo(2, true, 600 * kMiB),
                                                    algo(3, true, 10 * kMiB), algo(4, true, 0)};
  EXPECT_EQ(m::pick_conv_algorithm(c, options(m::Determinism::prefer, 256 * kMiB)).index, 2);
  EXPECT_EQ(m::pick_conv_algorithm(c, options(m::Determinism::prefer, 1024 * kMiB)).index, 1);
  EXPECT_EQ(m::pick_conv_algorithm(c, options(m::Determinism::any, 256 * kMiB)).index, 0);
}

TEST(ConvAlgorithm, PreferFallsBackToANonDeterministicOneOnlyWhereNoDeterministicFits) {
  const std::vector<m::ConvAlgorithmCandidate> c = {algo(1, true, 900 * kMiB), algo(2, false, 8 * kMiB)};
  EXPECT_EQ(m::pick_conv_algorithm(c, options(m::Determinism::prefer, 256 * kMiB)).index, 1);
  const m::ConvAlgorithmPick required =
      m::pick_conv_algorithm(c, options(m::Determinism::require, 256 * kMiB));
  EXPECT_EQ(required.index, -1);
  EXPECT_NE(required.why_none.find("every deterministic algorithm"), std::string::npos) << required.why_none;
  EXPECT_NE(required.why_none.find("900.0 MiB"), std::string::npos) << required.why_none;
  EXPECT_NE(required.why_none.find("cuda.conv_workspace_limit"), std::string::npos) << required.why_none;
}

TEST(ConvAlgorithm, UnusableAnswersAreNeverTaken) {
  const std::vector<m::ConvAlgorithmCandidate> c = {algo(1, true, 0, false), algo(2, false, 0, false)};
  for (m::Determinism d : {m::Determinism::prefer, m::Determinism::require, m::Determinism::any}) {
    const m::ConvAlgorithmPick p = m::pick_conv_algorithm(c, options(d, 256 * kMiB));
    EXPECT_EQ(p.index, -1);
    EXPECT_EQ(p.why_none, "cuDNN has no algorithm for this convolution and dtype");
  }
  EXPECT_EQ(m::pick_conv_algorithm({}, options(m::Determinism::any, 256 * kMiB)).index, -1);
}

TEST(ConvAlgorithm, RequireSaysSoWhereCudnnHasNoDeterministicAlgorithm) {
  const std::vector<m::ConvAlgorithmCandidate> c = {algo(1, false, 0), algo(2, false, kMiB)};
  const m::ConvAlgorithmPick p = m::pick_conv_algorithm(c, options(m::Determinism::require, 256 * kMiB));
  EXPECT_EQ(p.index, -1);
  EXPECT_NE(p.why_none.find("no deterministic algorithm"), std::string::npos) << p.why_none;
  EXPECT_NE(p.why_none.find("cuda.deterministic=prefer"), std::string::npos) << p.why_none;
}

TEST(ConvAlgorithm, TooLargeForTheLimitNamesTheSmallestWorkspace) {
  const std::vector<m::ConvAlgorithmCandidate> c = {algo(1, false, 3 * kMiB),
                                                    algo(2, true, 2 * kMiB + kMiB / 2)};
  const m::ConvAlgorithmPick p = m::pick_conv_algorithm(c, options(m::Determinism::any, kMiB));
  EXPECT_EQ(p.index, -1);
  EXPECT_NE(p.why_none.find("the smallest needs 2.5 MiB"), std::string::npos) << p.why_none;
  EXPECT_NE(p.why_none.find("(1.0 MiB)"), std::string::npos) << p.why_none;
  // A limit exactly at a workspace admits it.
  EXPECT_EQ(m::pick_conv_algorithm(c, options(m::Determinism::any, 3 * kMiB)).index, 0);
}

TEST(ConvAlgorithm, OptionValuesParseOrAreRefused) {
  EXPECT_EQ(m::parse_determinism("prefer"), m::Determinism::prefer);
  EXPECT_EQ(m::parse_determinism("require"), m::Determinism::require);
  EXPECT_EQ(m::parse_determinism("any"), m::Determinism::any);
  EXPECT_FALSE(m::parse_determinism("true").has_value());
  EXPECT_FALSE(m::parse_determinism("").has_value());

  EXPECT_EQ(m::parse_bytes("0"), size_t(0));
  EXPECT_EQ(m::parse_bytes("1048576"), size_t(1) << 20);
  EXPECT_EQ(m::parse_bytes("512KiB"), size_t(512) << 10);
  EXPECT_EQ(m::parse_bytes("256MiB"), size_t(256) << 20);
  EXPECT_EQ(m::parse_bytes("2GiB"), size_t(2) << 30);
  // The grammar of --memory-budget (tandem/byte_size.hpp).
  EXPECT_EQ(m::parse_bytes("1.5GiB"), size_t(3) << 29);
  EXPECT_EQ(m::parse_bytes("12 MiB"), size_t(12) << 20);
  for (const char* bad : {"", "MiB", "-1", "3MB", "7TiB", "99999999999999999999", "17179869184GiB"})
    EXPECT_FALSE(m::parse_bytes(bad).has_value()) << bad;
}
