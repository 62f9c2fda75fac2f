// LoRA on a narrow base (lowering/lora_base.hpp) as the training graph has
// it: s8 base weights and f32 row scales (or bf16 weights), frozen, read
// through an f32 copy that forward makes just before its projection and
// backward makes again, so no copy lives from forward to backward.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "lowering/autodiff.hpp"
#include "lowering/lora_base.hpp"
#include "lowering/model_graph.hpp"
#include "model/model_parser.hpp"

namespace tandem::test {
namespace {

using host::Graph;
using host::Node;
using host::NodeId;
using host::Value;

const char* kModel = R"([model]
name = "qlora"
input = [12]
classes = 5
[[layers]]
name = "fc1"
op = "linear"
out_features = 9
[[layers]]
name = "fc2"
op = "linear"
out_features = 7
[[layers]]
name = "fc3"
op = "linear"
out_features = 5
[features.lora]
rank = 2
base = "int8"
targets = ["fc2"]
)";

// The training graph of `text` up to its backward, the widened bases made again.
std::optional<host::lowering::ModelGraph> lowered(const std::string& text) {
  auto spec = host::model::parse_model_text(text, "qlora.toml");
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  if (!spec.ok()) return std::nullopt;
  auto model = host::lowering::build_forward(*spec, 4, host::lowering::Mode::Train);
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) return std::nullopt;
  EXPECT_TRUE(host::lowering::append_backward(*model).ok());
  EXPECT_TRUE(host::lowering::widen_again_for_backward(*model).ok());
  return std::move(*model);
}

TEST(Int8Base, IsFrozenS8ReadThroughCopiesThatDoNotLiveFromForwardToBackward) {
  auto model = lowered(kModel);
  ASSERT_TRUE(model.has_value());
  const Graph& g = model->graph;
  EXPECT_EQ(model->narrow_bases.size(), 3u);
  for (const char* layer : {"fc1", "fc2", "fc3"}) {
    const std::string name = std::string(layer) + ".weight";
    const Value* q = g.value_by_name(name);
    const Value* scale = g.value_by_name(name + "_scale");
    ASSERT_NE(q, nullptr);
    ASSERT_NE(scale, nullptr);
    EXPECT_EQ(q->type.dtype, TDM_S8);
    EXPECT_EQ(scale->type.dtype, TDM_F32);
    EXPECT_EQ(scale->type.dims, (std::vector<int64_t>{q->type.dims[0]}));
    EXPECT_FALSE(model->trained(q->id));
    EXPECT_FALSE(model->trained(scale->id));
    EXPECT_EQ(g.value_by_name("grad." + name), nullptr);
  }
  // Every forward copy is read in forward only. The gradient reaches fc2's
  // adapter through fc3's base, which backward dequantizes again; nothing
  // trained lies before fc2, so its base and fc1's get no backward copy.
  size_t again = 0;
  for (const std::vector<NodeId>& chain : model->narrow_bases) {
    ASSERT_EQ(chain.size(), 2u);
    const NodeId cast = chain[0], mul = chain[1];
    for (NodeId reader : g.consumers(g.node(mul)->outputs[0]))
      EXPECT_EQ(g.node(reader)->phase, TDM_PHASE_FORWARD) << g.node(reader)->name;
    const Node* copy = g.node_by_name(g.node(mul)->name + ".backward");
    if (copy == nullptr) continue;
    ++again;
    EXPECT_EQ(copy->phase, TDM_PHASE_BACKWARD);
    EXPECT_EQ(g.node(g.value(copy->inputs[0])->producer)->name, g.node(cast)->name + ".backward");
    for (NodeId reader : g.consumers(copy->outputs[0]))
      EXPECT_NE(g.node(reader)->phase, TDM_PHASE_FORWARD) << g.node(reader)->name;
  }
  EXPECT_EQ(again, 1u);
  EXPECT_NE(g.node_by_name("fc3.weight.dequantized.backward"), nullptr);
}

TEST(Bf16Base, IsFrozenBf16ReadThroughACastMadeAgainInBackward) {
  std::string text = kModel;
  text.replace(text.find("\"int8\""), 6, "\"bf16\"");
  auto model = lowered(text);
  ASSERT_TRUE(model.has_value());
  const Graph& g = model->graph;
  ASSERT_EQ(model->narrow_bases.size(), 3u);
  for (const std::vector<NodeId>& chain : model->narrow_bases) {
    ASSERT_EQ(chain.size(), 1u);
    const Node& cast = *g.node(chain[0]);
    EXPECT_EQ(g.value(cast.inputs[0])->type.dtype, TDM_BF16);
    EXPECT_FALSE(model->trained(cast.inputs[0]));
    for (NodeId reader : g.consumers(cast.outputs[0]))
      EXPECT_EQ(g.node(reader)->phase, TDM_PHASE_FORWARD) << g.node(reader)->name;
  }
  EXPECT_EQ(g.value_by_name("fc1.weight_scale"), nullptr);
  EXPECT_NE(g.node_by_name("fc3.weight.widen.backward"), nullptr);
  EXPECT_EQ(g.node_by_name("fc1.weight.widen.backward"), nullptr);
}

TEST(Int8Base, ItsSettingIsCheckedAndZeroStageThreeRefused) {
  std::string text = kModel;
  text.replace(text.find("\"int8\""), 6, "\"int4\"");
  auto spec = host::model::parse_model_text(text, "qlora.toml");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("base must be \"f32\", \"bf16\" or \"int8\""), std::string::npos)
      << spec.error().message;
  auto ok = host::model::parse_model_text(kModel, "qlora.toml");
  ASSERT_TRUE(ok.ok());
  host::lowering::ZeroSharding zero{3, 2, {}, {}, {}};
  auto m = host::lowering::build_forward(*ok, 4, host::lowering::Mode::Train, TDM_F32, {}, nullptr, 0, zero);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("ZeRO stage 3"), std::string::npos) << m.error().message;
}

}  // namespace
}  // namespace tandem::test
