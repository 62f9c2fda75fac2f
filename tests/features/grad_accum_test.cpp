// The grad_accum feature plugin on the reference backend: k = 4 micro-batches
// of 32 give the weights of one batch of 128 after 10 steps, with about a
// quarter of the activation memory.
//
// Tolerance 1e-5 absolute on weights of order 0.1-1: the two runs sum the
// same 128 per-sample gradients in another order (four means of 32 summed,
// vs one mean of 128), a difference of a few f32 ulps per step, compounded
// over 10 momentum steps.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <vector>

#include "training_fixture.hpp"

namespace tandem::test {
namespace {

const char* kModel = R"([model]
input = [1, 6, 6]
classes = 4
[[layers]]
name = "conv"
op = "conv2d"
out_channels = 4
kernel = 3
padding = 1
[[layers]]
name = "relu"
op = "relu"
[[layers]]
name = "fc1"
op = "linear"
out_features = 16
activation = "tanh"
[[layers]]
name = "fc2"
op = "linear"
out_features = 4
[train]
lr = 0.05
momentum = 0.9
weight_decay = 0.001
clip_grad_norm = 5.0
batch_size = 128
steps = 10
seed = 11
[data]
format = "synthetic"
synthetic_samples = 1280
synthetic_test_samples = 0
)";

class GradAccum : public TrainingOnReference {
 protected:
  void SetUp() override { load("grad_accum"); }

  struct Outcome {
    std::vector<std::vector<float>> weights;
    uint64_t activations = 0;
  };

  Outcome train(const std::vector<std::string>& overrides) {
    auto t = trainer(kModel, overrides);
    EXPECT_TRUE(t.ok()) << t.error().message;
    if (!t.ok()) return {};
    auto r = (*t)->run();
    EXPECT_TRUE(r.ok()) << r.error().message;
    Outcome out;
    out.activations = (*t)->executor().plan().estimate.activations;
    for (const char* name : {"conv.weight", "fc1.weight", "fc2.weight"})
      out.weights.push_back(read(**t, name));
    return out;
  }
};

TEST_F(GradAccum, FourMicroBatchesOf32MatchOneBatchOf128) {
  const Outcome whole = train({});
  const Outcome accumulated = train({"train.batch_size=32", "features.grad_accum.steps=4"});
  ASSERT_EQ(whole.weights.size(), accumulated.weights.size());
  double worst = 0;
  for (size_t t = 0; t < whole.weights.size(); ++t)
    for (size_t i = 0; i < whole.weights[t].size(); ++i)
      worst = std::max(worst, static_cast<double>(std::abs(whole.weights[t][i] - accumulated.weights[t][i])));
  std::cout << "largest weight difference after 10 steps: " << worst << "; activation memory "
            << accumulated.activations << " vs " << whole.activations << " bytes" << std::endl;
  EXPECT_LE(worst, 1e-5);
  // About a quarter: the graph is built for 32 samples instead of 128.
  EXPECT_LE(static_cast<double>(accumulated.activations), 0.3 * static_cast<double>(whole.activations));
}

// micro_batch = 32 splits each batch of 128 into 4: the same training as
// batch 128 whole, with the graph (and its activations) built for 32.
TEST_F(GradAccum, MicroBatchSizeSplitsEachBatch) {
  const Outcome whole = train({});
  const Outcome split = train({"features.grad_accum.micro_batch=32"});
  ASSERT_EQ(whole.weights.size(), split.weights.size());
  double worst = 0;
  for (size_t t = 0; t < whole.weights.size(); ++t)
    for (size_t i = 0; i < whole.weights[t].size(); ++i)
      worst = std::max(worst, static_cast<double>(std::abs(whole.weights[t][i] - split.weights[t][i])));
  std::cout << "micro_batch = 32 vs batch 128: largest weight difference " << worst << "; activation memory "
            << split.activations << " vs " << whole.activations << " bytes" << std::endl;
  EXPECT_LE(worst, 1e-5);
  EXPECT_LE(static_cast<double>(split.activations), 0.3 * static_cast<double>(whole.activations));
  auto uneven = trainer(kModel, {"features.grad_accum.micro_batch=48"});
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.error().message.find("does not divide [train] batch_size = 128"), std::string::npos)
      << uneven.error().message;
  auto both = trainer(kModel, {"features.grad_accum.micro_batch=32", "features.grad_accum.steps=2"});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.error().message.find("not both"), std::string::npos) << both.error().message;
}

TEST_F(GradAccum, BadStepsAreNamed) {
  auto t = trainer(kModel, {"features.grad_accum.steps=zero"});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("steps must be a whole number"), std::string::npos) << t.error().message;
}

}  // namespace
}  // namespace tandem::test
