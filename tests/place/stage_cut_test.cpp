// Cutting a model's layers into pipeline stages: balanced on measured
// costs, or where [train] pipeline_cut says (a layer's name, or a repeat
// copy's), with a clear error for a cut that cannot be taken.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "model/model_parser.hpp"
#include "place/stage_cut.hpp"

namespace tandem::test {
namespace {

const char* const kModel = R"([model]
name = "cut"
input = [8]
classes = 4
[[layers]]
name = "fc"
op = "linear"
out_features = 8
[[layers]]
name = "h"
op = "repeat"
count = 3
  [[layers.body]]
  name = "a"
  op = "linear"
  out_features = 8
  [[layers.body]]
  name = "b"
  op = "linear"
  out_features = 8
[[layers]]
name = "head"
op = "linear"
out_features = 4
[train]
batch_size = 4
steps = 1
pipeline_parallel = 3
[data]
format = "synthetic"
)";

host::model::ModelSpec spec() {
  auto s = host::model::parse_model_text(kModel, "cut.toml");
  EXPECT_TRUE(s.ok()) << s.error().message;
  return *s;
}

// fc, h.0.a, h.0.b, h.1.a, h.1.b, h.2.a, h.2.b, head
TEST(StageCut, MeasuredCostsBalanceTheLargestStage) {
  const auto s = spec();
  std::map<std::string, double> costs;
  for (const auto& l : s.layers) costs[l.name] = 1;
  costs["fc"] = 7;  // as much as the other seven together
  auto cut = host::place::cut_into_stages(s, costs, 2);
  ASSERT_TRUE(cut.ok()) << cut.error().message;
  EXPECT_EQ(*cut, (std::vector<size_t>{0, 1, 1, 1, 1, 1, 1, 1}));
}

TEST(StageCut, AGivenCutBeginsEachStageAtTheLayerOrRepeatCopyItNames) {
  auto cut = host::place::cut_at(spec(), {"h.1", "h.2.b"}, 3);
  ASSERT_TRUE(cut.ok()) << cut.error().message;
  EXPECT_EQ(*cut, (std::vector<size_t>{0, 0, 0, 1, 1, 1, 2, 2}));
}

TEST(StageCut, ACutThatCannotBeTakenSaysWhy) {
  const auto s = spec();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"h.1"}, "cut.toml: [train] pipeline_cut names 1 layer(s) but pipeline_parallel = 3 needs 2"},
      {{"h.1", "tail"}, "'tail' names no layer of the model"},
      {{"h.2", "h.1"}, "'h.1' begins stage 2 where an earlier stage begins"},
      {{"fc", "h.1"}, "'fc' begins stage 1 at the model's first layer"},
  };
  for (const auto& [firsts, message] : cases) {
    auto cut = host::place::cut_at(s, firsts, 3);
    ASSERT_FALSE(cut.ok()) << message;
    EXPECT_NE(cut.error().message.find(message), std::string::npos) << cut.error().message;
  }
}

}  // namespace
}  // namespace tandem::test
