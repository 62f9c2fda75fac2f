// ZeRO's exchanges overlapped with compute (lowering/zero_overlap.hpp): the
// waits the pass adds and where, on a three-layer MLP sharded over 4 ranks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lowering/autodiff.hpp"
#include "lowering/model_graph.hpp"
#include "lowering/optimizer.hpp"
#include "lowering/zero_gathers.hpp"
#include "lowering/zero_overlap.hpp"
#include "model/model_parser.hpp"
#include "ops/op_table.hpp"

namespace tandem::test {
namespace {

using host::Graph;
using host::Node;
using host::NodeId;
using host::ValueId;
using host::lowering::ModelGraph;

const char* kModel = R"([model]
name = "overlap"
input = [12]
classes = 5
[[layers]]
name = "fc1"
op = "linear"
out_features = 9
activation = "relu"
[[layers]]
name = "fc2"
op = "linear"
out_features = 7
activation = "relu"
[[layers]]
name = "fc3"
op = "linear"
out_features = 5
)";

ModelGraph lowered(int stage) {
  auto spec = host::model::parse_model_text(kModel, "overlap.toml");
  EXPECT_TRUE(spec.ok());
  host::lowering::ZeroSharding zero{stage, 4, {}, {}, {}};
  auto model =
      host::lowering::build_forward(*spec, 4, host::lowering::Mode::Train, TDM_F32, {}, nullptr, 0, zero);
  EXPECT_TRUE(model.ok()) << model.error().message;
  EXPECT_TRUE(host::lowering::append_backward(*model).ok());
  EXPECT_TRUE(host::lowering::gather_again_for_backward(*model).ok());
  EXPECT_TRUE(host::lowering::append_optimizer(*model, spec->train).ok());
  auto overlapped = host::lowering::overlap_zero_exchanges(*model);
  EXPECT_TRUE(overlapped.ok()) << overlapped.error().message;
  return std::move(*model);
}

host::ops::HostKind kind(const Node& n) {
  const host::ops::OpInfo* info = host::ops::find(n.op);
  return info != nullptr ? info->host : host::ops::HostKind::None;
}

size_t at(const Graph& g, NodeId id) {
  return *g.position(id);
}

// The first node of `layer` in `phase` that is a kernel (not an exchange).
size_t first_compute(const Graph& g, const std::string& layer, tdm_phase phase) {
  for (size_t i = 0; i < g.node_count(); ++i) {
    const Node& n = *g.node_at(i);
    if (n.layer == layer && n.phase == phase && !host::ops::is(n.op, host::ops::kCollective)) return i;
  }
  return g.node_count();
}

// Every exchange of forward and backward is read by one wait, which comes
// before every reader of the value it hands on and keeps the exchange's
// input alive; nothing else reads the value in flight.
void expect_waited(const Graph& g) {
  size_t exchanges = 0;
  for (size_t i = 0; i < g.node_count(); ++i) {
    const Node& e = *g.node_at(i);
    const host::ops::HostKind k = kind(e);
    if (e.phase == TDM_PHASE_OPTIMIZER ||
        (k != host::ops::HostKind::ZeroReduceScatter && k != host::ops::HostKind::ZeroAllGather))
      continue;
    ++exchanges;
    const std::vector<NodeId> readers = g.consumers(e.outputs[0]);
    ASSERT_EQ(readers.size(), 1u) << e.name;
    const Node& wait = *g.node(readers[0]);
    ASSERT_EQ(wait.op, host::ops::kZeroWait) << e.name;
    EXPECT_GT(at(g, wait.id), i) << e.name;
    EXPECT_EQ(wait.inputs[1], e.inputs[0]) << e.name << ": the wait keeps what the exchange reads";
    EXPECT_EQ(host::lowering::zero_exchange_result(g, e.outputs[0]), wait.outputs[0]);
    for (NodeId reader : g.consumers(wait.outputs[0])) EXPECT_LT(at(g, wait.id), at(g, reader)) << e.name;
  }
  EXPECT_GT(exchanges, 0u);
}

TEST(ZeroOverlap, StageThreeGathersTheNextLayerWhileOneComputes) {
  const ModelGraph m = lowered(3);
  const Graph& g = m.graph;
  expect_waited(g);
  // Each layer's forward gathers start before the layer before it computes
  // (its waits came first), and end before the layer itself computes.
  for (auto [layer, before] : {std::pair{"fc2", "fc1"}, std::pair{"fc3", "fc2"}}) {
    size_t gathers = 0;
    for (size_t i = 0; i < g.node_count(); ++i) {
      const Node& n = *g.node_at(i);
      if (kind(n) != host::ops::HostKind::ZeroAllGather || n.layer != layer || n.phase != TDM_PHASE_FORWARD)
        continue;
      ++gathers;
      EXPECT_LT(i, first_compute(g, before, TDM_PHASE_FORWARD)) << n.name;
      const NodeId wait = g.consumers(n.outputs[0])[0];
      EXPECT_LT(at(g, wait), first_compute(g, layer, TDM_PHASE_FORWARD)) << n.name;
    }
    EXPECT_EQ(gathers, 2u) << layer << "'s weight and bias";
  }
  // Backward gathers fc2's parameters again while fc3's backward runs.
  for (size_t i = 0; i < g.node_count(); ++i) {
    const Node& n = *g.node_at(i);
    if (kind(n) == host::ops::HostKind::ZeroAllGather && n.layer == "fc2" && n.phase == TDM_PHASE_BACKWARD) {
      EXPECT_LT(i, first_compute(g, "fc3", TDM_PHASE_BACKWARD)) << n.name;
    }
  }
  // The gradients the optimizer reads are the finished shards.
  for (const auto& [p, grad] : m.gradients) {
    EXPECT_EQ(g.value(grad)->kind, TDM_VALUE_GRADIENT) << g.value(grad)->name;
    EXPECT_EQ(g.node(g.value(grad)->producer)->op, host::ops::kZeroWait) << g.value(grad)->name;
  }
}

TEST(ZeroOverlap, StageTwoKeepsTwoReduceScattersInFlightWhileBackwardRuns) {
  const ModelGraph m = lowered(2);
  const Graph& g = m.graph;
  expect_waited(g);
  std::vector<size_t> launches, waits;
  size_t optimizer = g.node_count();
  for (size_t i = 0; i < g.node_count(); ++i) {
    const Node& n = *g.node_at(i);
    if (n.phase == TDM_PHASE_OPTIMIZER) optimizer = std::min(optimizer, i);
    if (kind(n) == host::ops::HostKind::ZeroReduceScatter) launches.push_back(i);
    if (kind(n) == host::ops::HostKind::ZeroWait) waits.push_back(i);
  }
  ASSERT_EQ(launches.size(), 6u);
  ASSERT_EQ(waits.size(), 6u);
  for (size_t k = 0; k < launches.size(); ++k) {
    EXPECT_LT(launches[k], waits[k]);
    if (k + 2 < launches.size()) {
      EXPECT_LT(waits[k], launches[k + 2]) << "at most two in flight";
    }
    EXPECT_LT(waits[k], optimizer);
  }
  // fc3's and fc2's gradients are averaged while the layer below runs
  // backward (its linear_grad_weight, at least).
  for (size_t k = 0; k < 4; ++k) {
    size_t computed = 0;
    for (size_t i = launches[k] + 1; i < waits[k]; ++i)
      computed += !host::ops::is(g.node_at(i)->op, host::ops::kCollective);
    EXPECT_GE(computed, 2u) << g.node_at(launches[k])->name;
  }
  for (const auto& [shard, whole] : m.zero.gradients) {
    EXPECT_EQ(g.value(shard)->kind, TDM_VALUE_GRADIENT);
    EXPECT_EQ(g.node(g.value(shard)->producer)->op, host::ops::kZeroWait);
  }
}

}  // namespace
}  // namespace tandem::test
