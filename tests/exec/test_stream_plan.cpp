// When a streamed value is on the device (exec/stream_plan.hpp): fetched a
// unit ahead of a reading first touch, never for a writing one, written home
// only when written, dropped between far-apart uses and kept between close
// ones; and the window's peak.
#include <gtest/gtest.h>

#include "exec/stream_plan.hpp"

namespace tandem::host::exec {
namespace {

constexpr ValueId kW = 1, kGrad = 2, kOther = 3;

// A schedule of single-node layers "l0", "l1", ...; `touch` marks what each reads and writes.
std::vector<NodeTouches> schedule(size_t n) {
  std::vector<NodeTouches> nodes(n);
  for (size_t i = 0; i < n; ++i) nodes[i].layer = "l" + std::to_string(i);
  return nodes;
}

// The residencies of `value`, in order.
std::vector<Residency> of(const std::vector<Residency>& plan, ValueId value) {
  std::vector<Residency> out;
  for (const Residency& r : plan)
    if (r.value == value) out.push_back(r);
  return out;
}

TEST(StreamPlan, FarApartUsesAreSeparateResidenciesFetchedOneUnitAhead) {
  auto nodes = schedule(12);
  for (size_t i = 0; i < 12; ++i) nodes[i].reads = {kOther};  // every node a unit
  nodes[2].reads.push_back(kW);                               // forward
  nodes[9].reads.push_back(kW);                               // backward
  nodes[9].writes = {kGrad};
  const auto plan = plan_residencies(nodes, {kW, kGrad, kOther}, 1);
  const auto w = of(plan, kW);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(w[0].fetch);
  EXPECT_FALSE(w[0].write_home);
  EXPECT_EQ(w[0].start, 1u) << "fetched from the unit before its use";
  EXPECT_EQ(w[0].end, 2u) << "dropped after its last use: nothing to write home";
  EXPECT_EQ(w[1].start, 8u);
  EXPECT_EQ(w[1].end, 9u);
  const auto grad = of(plan, kGrad);
  ASSERT_EQ(grad.size(), 1u);
  EXPECT_FALSE(grad[0].fetch) << "a gradient's first touch writes it: nothing to fetch";
  EXPECT_TRUE(grad[0].write_home);
  EXPECT_EQ(grad[0].start, 9u);
  EXPECT_EQ(grad[0].end, 10u) << "its write home has the next unit to finish";
  ASSERT_EQ(of(plan, kOther).size(), 1u) << "touched at every node: kept throughout";
}

TEST(StreamPlan, CloseUsesShareOneResidency) {
  auto nodes = schedule(6);
  nodes[1].reads = {kW};
  nodes[3].reads = {kW};
  nodes[3].writes = {kW};  // an in-place update two units later
  const auto plan = plan_residencies(nodes, {kW}, 1);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].touches.size(), 2u);
  EXPECT_TRUE(plan[0].fetch);
  EXPECT_TRUE(plan[0].write_home);
  EXPECT_EQ(plan[0].start, 1u) << "the first unit is fetched from its own start";
  EXPECT_EQ(plan[0].end, 5u) << "the last unit: its write home has until the schedule ends";
}

TEST(StreamPlan, DeeperPrefetchStartsEarlierAndUnitsAreLayersNotNodes) {
  auto nodes = schedule(8);
  // Layer "l1" spans nodes 1-3; only node 3 touches a streamed value, yet
  // the unit starts with the layer's first node.
  nodes[2].layer = nodes[3].layer = "l1";
  nodes[1].reads = {kOther};
  nodes[3].reads = {kOther};
  nodes[5].reads = {kOther};
  nodes[7].reads = {kW};
  const auto one = plan_residencies(nodes, {kW, kOther}, 1);
  const auto two = plan_residencies(nodes, {kW, kOther}, 2);
  auto of_w = [](const std::vector<Residency>& plan) {
    for (const Residency& r : plan)
      if (r.value == kW) return r;
    return Residency{};
  };
  EXPECT_EQ(of_w(one).start, 5u);
  EXPECT_EQ(of_w(two).start, 1u) << "two units ahead: layer l1 from its first node";
}

TEST(StreamPlan, WindowPeakIsTheMostBytesLiveAtOnce) {
  std::vector<Residency> plan(3);
  plan[0].start = 0, plan[0].end = 4;
  plan[1].start = 3, plan[1].end = 6;
  plan[2].start = 5, plan[2].end = 9;
  EXPECT_EQ(window_peak(plan, {100, 10, 1}), 110u);
  EXPECT_EQ(window_peak({}, {}), 0u);
}

}  // namespace
}  // namespace tandem::host::exec
