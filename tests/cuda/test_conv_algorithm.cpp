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

TEST(ConvAlgorithm, TheGraphPathsFirstFitInCandidateOrderIsTheRulesPick) {
  // The graph path finalizes plans one at a time in conv_candidate_order and
  // takes the first usable one within the limit: the same pick as the rule
  // over every answer, for every mix of answers (a fixed pseudo-random walk).
  uint32_t state = 12345;
  const auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int round = 0; round < 2000; ++round) {
    std::vector<m::ConvAlgorithmCandidate> c(next() % 7);
    std::vector<bool> deterministic;
    for (size_t i = 0; i < c.size(); ++i) {
      c[i] = algo(int(i), next() % 2 == 0, size_t(next() % 5) * kMiB, next() % 4 != 0);
      deterministic.push_back(c[i].deterministic);
    }
    for (m::Determinism d : {m::Determinism::prefer, m::Determinism::require, m::Determinism::any}) {
      const m::ConvAlgorithmOptions o = options(d, 2 * kMiB);
      int first_fit = -1;
      for (size_t i : m::conv_candidate_order(deterministic, d))
        if (c[i].usable && c[i].workspace <= o.workspace_limit) {
          first_fit = int(i);
          break;
        }
      ASSERT_EQ(first_fit, m::pick_conv_algorithm(c, o).index) << "round " << round;
    }
  }
}

TEST(ConvAlgorithm, CandidateOrderPutsDeterministicEnginesFirstUnlessAnyIsAllowed) {
  const std::vector<bool> deterministic = {false, true, false, true};
  EXPECT_EQ(m::conv_candidate_order(deterministic, m::Determinism::prefer),
            (std::vector<size_t>{1, 3, 0, 2}));
  EXPECT_EQ(m::conv_candidate_order(deterministic, m::Determinism::require), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(m::conv_candidate_order(deterministic, m::Determinism::any), (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(ConvAlgorithm, EngineNumericsKeepF32UnlessTf32AndAlwaysSumInF32) {
  m::EngineNumerics plain, tensor_core, down_convert, reduced, nondeterministic;
  tensor_core.tensor_core = true;
  down_convert.down_converts_inputs = true;
  reduced.reduced_precision_reduction = true;
  nondeterministic.nondeterministic = true;  // the determinism option decides, not this rule
  // f32 stays f32 unless cuda.tf32: no tensor-core (TF32) or down-converting engines.
  EXPECT_TRUE(m::engine_numerics_allowed(plain, true, false));
  EXPECT_TRUE(m::engine_numerics_allowed(nondeterministic, true, false));
  EXPECT_FALSE(m::engine_numerics_allowed(tensor_core, true, false));
  EXPECT_FALSE(m::engine_numerics_allowed(down_convert, true, false));
  EXPECT_TRUE(m::engine_numerics_allowed(tensor_core, true, true));
  EXPECT_TRUE(m::engine_numerics_allowed(down_convert, true, true));
  // f16/bf16 use tensor cores but always sum in f32.
  EXPECT_TRUE(m::engine_numerics_allowed(tensor_core, false, false));
  for (bool f32 : {true, false})
    for (bool tf32 : {true, false}) EXPECT_FALSE(m::engine_numerics_allowed(reduced, f32, tf32));
}

TEST(ConvAlgorithm, TheConvApiOptionParsesOrIsRefused) {
  EXPECT_EQ(m::parse_conv_api("graph"), m::ConvApi::graph);
  EXPECT_EQ(m::parse_conv_api("legacy"), m::ConvApi::legacy);
  for (const char* bad : {"", "Graph", "backend", "v7"})
    EXPECT_FALSE(m::parse_conv_api(bad).has_value()) << bad;
}
