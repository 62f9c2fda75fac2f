// The host graph: ids, names, schedule order, cycles.
#include <gtest/gtest.h>

#include "graph/graph.hpp"

namespace tandem::host {
namespace {

TensorType f32(std::vector<int64_t> dims) {
  return TensorType{TDM_F32, std::move(dims)};
}

struct Mlp {
  Graph g;
  ValueId x, w;
  NodeId fc1, relu;
  Mlp() {
    x = *g.add_value("x", TDM_VALUE_INPUT, f32({4, 8}));
    w = *g.add_value("fc1.weight", TDM_VALUE_PARAMETER, f32({8, 8}));
    fc1 = *g.insert_node({"linear", "fc1", "fc1", TDM_PHASE_FORWARD, {}, {x, w}, {f32({4, 8})}, {}});
    relu = *g.insert_node(
        {"relu", "relu1", "relu1", TDM_PHASE_FORWARD, {}, {g.node(fc1)->outputs[0]}, {f32({4, 8})}, {}});
  }
};

TEST(Graph, BuildsInScheduleOrder) {
  Mlp m;
  ASSERT_EQ(m.g.node_count(), 2u);
  EXPECT_EQ(m.g.node_at(0)->name, "fc1");
  EXPECT_EQ(m.g.node_at(1)->name, "relu1");
  EXPECT_EQ(m.g.value_count(), 4u);
  const Value* out = m.g.value(m.g.node(m.fc1)->outputs[0]);
  EXPECT_EQ(out->name, "fc1:0");
  EXPECT_EQ(out->producer, m.fc1);
  EXPECT_EQ(m.g.consumers(out->id), std::vector<NodeId>{m.relu});
  EXPECT_EQ(m.g.value_by_name("x")->producer, kNoNode);
}

TEST(Graph, DuplicateNamesRejected) {
  Mlp m;
  Result<NodeId> dup = m.g.insert_node({"relu", "fc1", "", TDM_PHASE_FORWARD, {}, {m.x}, {f32({4, 8})}, {}});
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().status, TDM_INVALID_ARGUMENT);
  EXPECT_NE(dup.error().message.find("a node named 'fc1' already exists"), std::string::npos);
  EXPECT_FALSE(m.g.add_value("x", TDM_VALUE_INPUT, f32({1})).ok());
  EXPECT_FALSE(m.g.add_state("fc1:0", f32({1}), 0.0).ok());
}

TEST(Graph, InsertBeforeAnchorAndOrderChecks) {
  Mlp m;
  ValueId h = m.g.node(m.fc1)->outputs[0];
  // A cast between fc1 and relu1, anchored before relu1; layer inherited.
  NodeId cast = *m.g.insert_node({"cast",
                                  "fc1.cast",
                                  "",
                                  TDM_PHASE_FORWARD,
                                  {{"to", int64_t{TDM_BF16}}},
                                  {h},
                                  {TensorType{TDM_BF16, {4, 8}}},
                                  {}},
                                 m.relu);
  EXPECT_EQ(m.g.node_at(1)->id, cast);
  EXPECT_EQ(m.g.node(cast)->layer, "relu1");
  ValueId c = m.g.node(cast)->outputs[0];
  ASSERT_TRUE(m.g.replace_uses(h, c, cast).ok());
  EXPECT_EQ(m.g.node(m.relu)->inputs[0], c);
  EXPECT_EQ(m.g.node(cast)->inputs[0], h);  // the exception keeps reading h

  // Reading a value before its producer runs is refused.
  Result<NodeId> early =
      m.g.insert_node({"relu", "early", "", TDM_PHASE_FORWARD, {}, {c}, {f32({4, 8})}, {}}, m.fc1);
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.error().message.find("before its producer 'fc1.cast'"), std::string::npos);
  EXPECT_FALSE(m.g.insert_node({"relu", "bad", "", TDM_PHASE_FORWARD, {}, {c}, {}, {}}, 12345).ok());
}

TEST(Graph, CyclesRejected) {
  Mlp m;
  ValueId r = m.g.node(m.relu)->outputs[0];
  uint64_t before = m.g.generation();
  Result<void> cyc = m.g.set_input(m.fc1, 0, r);
  ASSERT_FALSE(cyc.ok());
  EXPECT_NE(cyc.error().message.find("cyclic"), std::string::npos);
  EXPECT_FALSE(m.g.set_input(m.relu, 0, r).ok());  // its own output
  EXPECT_FALSE(m.g.replace_uses(m.x, r, kNoNode).ok());
  EXPECT_EQ(m.g.node(m.fc1)->inputs[0], m.x);  // unchanged
  EXPECT_EQ(m.g.generation(), before);
}

TEST(Graph, MoveKeepsEveryReadAfterItsProducer) {
  Mlp m;
  // A node that reads only graph inputs may go anywhere before its readers.
  const NodeId scale =
      *m.g.insert_node({"mul", "scale", "scale", TDM_PHASE_FORWARD, {}, {m.w, m.w}, {f32({8, 8})}, {}});
  ASSERT_TRUE(m.g.move_node(scale, m.fc1).ok());
  EXPECT_EQ(m.g.node_at(0)->name, "scale");
  EXPECT_EQ(m.g.node_at(1)->name, "fc1");
  ASSERT_TRUE(m.g.move_node(scale, kNoNode).ok());
  EXPECT_EQ(m.g.node_at(2)->name, "scale");
  // relu1 before fc1 would read fc1's output before fc1 runs; fc1 after
  // relu1 would write it after relu1 read it.
  auto early = m.g.move_node(m.relu, m.fc1);
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.error().message.find("which produces its input"), std::string::npos)
      << early.error().message;
  auto late = m.g.move_node(m.fc1, kNoNode);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.error().message.find("which reads its output"), std::string::npos) << late.error().message;
  EXPECT_EQ(m.g.node_at(0)->name, "fc1") << "a refused move leaves the schedule as it was";
  EXPECT_FALSE(m.g.move_node(m.fc1, 12345).ok());
}

TEST(Graph, RemoveNeverReusesIds) {
  Mlp m;
  EXPECT_FALSE(m.g.remove_node(m.fc1).ok());  // relu1 still reads its output
  ASSERT_TRUE(m.g.remove_node(m.relu).ok());
  EXPECT_EQ(m.g.node(m.relu), nullptr);
  EXPECT_EQ(m.g.node_count(), 1u);
  NodeId again = *m.g.insert_node({"relu", "relu1", "", TDM_PHASE_FORWARD, {}, {m.x}, {f32({4, 8})}, {}});
  EXPECT_GT(again, m.relu);
  EXPECT_FALSE(m.g.remove_node(m.relu).ok());
}

TEST(Graph, AttrsAnnotationsStateDevice) {
  Mlp m;
  ASSERT_TRUE(m.g.set_attr(m.fc1, {"bias", int64_t{1}}).ok());
  ASSERT_TRUE(m.g.set_attr(m.fc1, {"bias", int64_t{0}}).ok());
  ASSERT_EQ(m.g.node(m.fc1)->attrs.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(m.g.node(m.fc1)->attrs[0].value), 0);
  ASSERT_TRUE(m.g.annotate(m.fc1, "checkpointing.segment", std::string("3")).ok());
  EXPECT_EQ(m.g.node(m.fc1)->annotations.at("checkpointing.segment"), "3");
  ASSERT_TRUE(m.g.annotate(m.fc1, "checkpointing.segment", std::nullopt).ok());
  EXPECT_TRUE(m.g.node(m.fc1)->annotations.empty());
  ValueId s = *m.g.add_state("amp.loss_scale", f32({}), 65536.0);
  EXPECT_EQ(m.g.value(s)->kind, TDM_VALUE_STATE);
  EXPECT_EQ(*m.g.value(s)->initial_value, 65536.0);
  ASSERT_TRUE(m.g.set_device(m.fc1, "reference:0").ok());
  EXPECT_EQ(m.g.node(m.fc1)->device, "reference:0");
}

}  // namespace
}  // namespace tandem::host
