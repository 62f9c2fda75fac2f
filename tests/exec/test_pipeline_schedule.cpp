// The order of a pipeline's micro-batches and what it costs: 1F1B's
// warm-up, the micro-batches each stage holds at once, the bubble of
// equal stages, and the orders that cannot finish.
#include <gtest/gtest.h>

#include "exec/pipeline_schedule.hpp"

namespace tandem::host::exec {
namespace {

// A chain of `stages` stages, each one forward segment (cost 1) and one
// backward segment (cost 2): stage s's forward reads stage s-1's, its
// backward reads stage s+1's.
PipelineShape chain(size_t stages) {
  PipelineShape shape;
  shape.stages.resize(stages);
  for (size_t s = 0; s < stages; ++s) {
    PipelineSegment forward{false, 1.0, {}}, backward{true, 2.0, {}};
    if (s > 0) forward.after.push_back({s - 1, 0});
    if (s + 1 < stages) backward.after.push_back({s + 1, 1});
    shape.stages[s] = {forward, backward};
  }
  return shape;
}

std::string units_text(const std::vector<PipelineUnit>& units) {
  std::string text;
  for (const PipelineUnit& u : units) text += (u.first == 0 ? "F" : "B") + std::to_string(u.micro) + " ";
  return text;
}

TEST(PipelineSchedule, OneForwardOneBackwardWarmsUpByTheStagesAfter) {
  const PipelineOrder order = one_forward_one_backward(chain(3), 4);
  EXPECT_EQ(units_text(order.stages[0]), "F0 F1 F2 B0 F3 B1 B2 B3 ");
  EXPECT_EQ(units_text(order.stages[1]), "F0 F1 B0 F2 B1 F3 B2 B3 ");
  EXPECT_EQ(units_text(order.stages[2]), "F0 B0 F1 B1 F2 B2 F3 B3 ");
  EXPECT_EQ(order.in_flight, (std::vector<size_t>{3, 2, 1}));
}

TEST(PipelineSchedule, FewMicroBatchesHoldNoMoreThanThereAre) {
  const PipelineOrder order = one_forward_one_backward(chain(4), 2);
  EXPECT_EQ(units_text(order.stages[0]), "F0 F1 B0 B1 ");
  EXPECT_EQ(order.in_flight[0], 2u);
}

TEST(PipelineSchedule, EqualStagesIdleTheBubbleFraction) {
  for (size_t stages : {2, 3, 4})
    for (size_t micro : {1, 4, 8, 16}) {
      const PipelineShape shape = chain(stages);
      auto timing = simulate(shape, one_forward_one_backward(shape, micro));
      ASSERT_TRUE(timing) << stages << " stages, " << micro << " micro-batches";
      EXPECT_NEAR(timing->idle_fraction(), bubble_fraction(stages, micro), 1e-9)
          << stages << " stages, " << micro << " micro-batches";
      EXPECT_DOUBLE_EQ(timing->makespan, 3.0 * double(micro + stages - 1));
    }
}

TEST(PipelineSchedule, OneAfterAnotherKeepsOneStageBusyAtATime) {
  const PipelineShape shape = chain(2);
  auto timing = simulate(shape, one_after_another(shape, 4));
  ASSERT_TRUE(timing);
  EXPECT_DOUBLE_EQ(timing->makespan, 4 * 6.0);  // each micro-batch: F F B B, nothing overlaps
  EXPECT_DOUBLE_EQ(timing->idle_fraction(), 0.5);
}

TEST(PipelineSchedule, AnOrderThatWaitsOnItselfIsRefused) {
  // Stage 0's forward reads stage 1's backward of the same micro-batch,
  // which reads stage 0's forward: no order can run it.
  PipelineShape shape = chain(2);
  shape.stages[0][0].after.push_back({1, 1});
  std::string why;
  EXPECT_FALSE(simulate(shape, one_forward_one_backward(shape, 2), &why));
  EXPECT_NE(why.find("waits forever"), std::string::npos) << why;
}

}  // namespace
}  // namespace tandem::host::exec
