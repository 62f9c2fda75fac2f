// The quantize feature plugin (quantization-aware training) on the
// reference backend: fake_quant nodes on every linear/conv input and weight,
// differentiated by the host's autodiff (fake_quant_grad), and a model that
// still trains.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
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
activation = "relu"
[[layers]]
name = "fc2"
op = "linear"
out_features = 4
[train]
lr = 0.05
momentum = 0.9
batch_size = 64
steps = 40
seed = 3
[data]
format = "synthetic"
synthetic_samples = 1280
synthetic_test_samples = 0
)";

class Qat : public TrainingOnReference {
 protected:
  void SetUp() override { load("quantize"); }

  struct Outcome {
    double loss = 0;
    std::vector<float> fc1;
    std::vector<std::string> fake_quant, fake_quant_grad;
  };

  Outcome train(std::vector<std::string> overrides) {
    auto t = trainer(kModel, overrides);
    EXPECT_TRUE(t.ok()) << t.error().message;
    if (!t.ok()) return {};
    auto r = (*t)->run();
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) return {};
    Outcome o;
    o.loss = r->last_loss;
    o.fc1 = read(**t, "fc1.weight");
    const host::Graph& g = (*t)->model().graph;
    for (size_t i = 0; i < g.node_count(); ++i) {
      const host::Node& n = *g.node_at(i);
      if (n.op == "fake_quant") o.fake_quant.push_back(n.name);
      if (n.op == "fake_quant_grad") o.fake_quant_grad.push_back(n.name);
    }
    return o;
  }
};

TEST_F(Qat, FakeQuantOnEveryLayerAndTheModelTrains) {
  const std::string qat = "features.quantize.mode=qat";
  const Outcome first = train({qat, "train.steps=1"});
  const Outcome trained = train({qat, "features.quantize.per_channel=true"});
  // Inputs and weights of conv, fc1 and fc2; each has its gradient except the
  // one on the data input (nothing upstream needs it).
  const std::vector<std::string> expected = {"conv.fake_quant_input", "conv.fake_quant_weight",
                                             "fc1.fake_quant_input",  "fc1.fake_quant_weight",
                                             "fc2.fake_quant_input",  "fc2.fake_quant_weight"};
  EXPECT_EQ(trained.fake_quant, expected);
  EXPECT_EQ(trained.fake_quant_grad.size(), expected.size() - 1);
  std::cout << "QAT loss: step 1 " << first.loss << ", step 40 " << trained.loss << std::endl;
  EXPECT_LT(trained.loss, 0.6 * first.loss);
}

TEST_F(Qat, FakeQuantChangesTheStepButOnlySlightly) {
  // One step with and without QAT from the same initial weights: the
  // rounding of 8-bit grids changes the gradient (so the nodes are not
  // identities), but by little (so training is not disrupted).
  const Outcome f32 = train({"train.steps=1"});
  const Outcome qat = train({"features.quantize.mode=qat", "train.steps=1"});
  ASSERT_EQ(f32.fc1.size(), qat.fc1.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < f32.fc1.size(); ++i) {
    diff = std::max(diff, double(std::fabs(f32.fc1[i] - qat.fc1[i])));
    norm = std::max(norm, double(std::fabs(f32.fc1[i])));
  }
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff, 0.05 * norm);
  EXPECT_NEAR(qat.loss, f32.loss, 0.02 * f32.loss);
}

TEST_F(Qat, ModeOtherThanQatPointsToTandemQuantize) {
  auto t = trainer(kModel, {"features.quantize.mode=ptq"});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("tandem quantize"), std::string::npos) << t.error().message;
}

}  // namespace
}  // namespace tandem::test
