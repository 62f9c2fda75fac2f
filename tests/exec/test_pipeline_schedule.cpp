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

// `stages` devices, each holding `chunks` chunks of the model round-robin
// (chunk k of device p is the model's stage k * stages + p); each chunk one
// forward segment (cost 1) and one backward segment (cost 2).
PipelineShape interleaved_chain(size_t stages, size_t chunks) {
  PipelineShape shape;
  shape.stages.resize(stages);
  const size_t model_stages = stages * chunks;
  // Device p's segments: forward of chunks 0..v-1, then backward of chunks v-1..0.
  const auto forward_ref = [&](size_t m) { return SegmentRef{m % stages, m / stages}; };
  const auto backward_ref = [&](size_t m) {
    return SegmentRef{m % stages, chunks + (chunks - 1 - m / stages)};
  };
  for (size_t p = 0; p < stages; ++p) shape.stages[p].resize(2 * chunks);
  for (size_t m = 0; m < model_stages; ++m) {
    PipelineSegment& f = shape.stages[m % stages][m / stages];
    f = {false, 1.0, {}, {}};
    if (m > 0) f.after.push_back(forward_ref(m - 1));
    const SegmentRef b = backward_ref(m);
    PipelineSegment& back = shape.stages[b.stage][b.segment];
    back = {true, 2.0, {}, {}};
    if (m + 1 < model_stages) back.after.push_back(backward_ref(m + 1));
  }
  return shape;
}

TEST(PipelineSchedule, InterleavedChunksShrinkTheBubble) {
  const PipelineShape shape = interleaved_chain(2, 2);
  auto order = interleaved_one_forward_one_backward(shape, 8);
  ASSERT_TRUE(order);
  std::string why;
  auto interleaved = simulate(shape, *order, &why);
  ASSERT_TRUE(interleaved) << why;
  // Equal chunks: the bubble (S - 1) / (v M + S - 1) of 2 stages, 2 chunks, 8 micro-batches.
  EXPECT_NEAR(interleaved->idle_fraction(), 1.0 / 17.0, 0.03);
  EXPECT_LT(interleaved->idle_fraction(), bubble_fraction(2, 8));
  EXPECT_FALSE(interleaved_one_forward_one_backward(chain(2), 8)) << "one chunk a device: plain 1F1B";
  EXPECT_FALSE(interleaved_one_forward_one_backward(shape, 7))
      << "micro-batches not a multiple of the stages";
}

}  // namespace
}  // namespace tandem::host::exec
