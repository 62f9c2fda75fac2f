// Streamed parameters (exec/stream_plan.hpp, --stream-params): a layer's
// parameters, gradients and optimizer state live in host memory and visit
// the device around the nodes that use them. Training computes exactly what
// resident training computes (the same kernels in the same order), with
// gradient accumulation, activation checkpointing, mixed precision,
// quantization-aware training and a resume too, on the reference backend
// and on onednn; the device then holds no parameter, gradient or
// optimizer state of a streamed layer outside its window, so a memory
// budget the resident run is refused under is met, and the device's
// measured peak is the plan's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "training_fixture.hpp"

namespace tandem::test {
namespace {

// Three pre-norm blocks of attention and an MLP, AdamW, a tied head.
std::string language_model(const std::string& text_file) {
  return R"([model]
task = "language_model"
context = 8
vocab_size = 256
[[layers]]
name = "tok"
op = "embedding"
num_embeddings = 256
embedding_dim = 32
[[layers]]
name = "h"
op = "repeat"
count = 3
[[layers.body]]
name = "norm"
op = "layer_norm"
[[layers.body]]
name = "attn"
op = "attention"
heads = 2
[[layers.body]]
name = "res"
op = "add"
inputs = ["h", "attn"]
[[layers.body]]
name = "fc"
op = "linear"
out_features = 128
activation = "relu"
[[layers.body]]
name = "proj"
op = "linear"
out_features = 32
[[layers.body]]
name = "res2"
op = "add"
inputs = ["res", "proj"]
[[layers]]
name = "head"
op = "linear"
out_features = 256
tie_weight = "tok"
[train]
optimizer = "adamw"
lr = 0.01
weight_decay = 0.1
batch_size = 4
steps = 5
seed = 3
[data]
format = "tokens"
train_tokens = ")" +
         text_file + R"("
)";
}

constexpr auto kNone = host::program::StreamChoice::None;
constexpr auto kEvery = host::program::StreamChoice::Every;
constexpr auto kAuto = host::program::StreamChoice::Auto;

class Streaming : public TrainingOnReference, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    load_all({"grad_accum", "checkpointing", "amp", "quantize"}, GetParam());
    text_ = dir_.file("streaming_lm.txt");  // one per test: ctest runs them side by side
    std::ofstream out(text_);
    for (int i = 0; i < 60; ++i) out << "the quick brown fox jumps over the lazy dog. ";
  }

  host::Result<std::unique_ptr<host::train::Trainer>> trained(host::program::StreamChoice streaming,
                                                              const std::vector<std::string>& overrides = {},
                                                              std::map<std::string, uint64_t> budgets = {}) {
    options_.streaming = streaming;
    options_.memory_budgets = std::move(budgets);
    auto t = trainer(language_model(text_), overrides);
    if (!t) return t.error();
    auto run = (*t)->run();
    if (!run) return run.error();
    losses_.push_back(run->last_loss);
    return t;
  }

  // Every parameter and optimizer tensor of two trained models, bit for bit.
  void expect_identical(host::train::Trainer& a, host::train::Trainer& b) {
    const host::Graph& g = a.model().graph;
    size_t compared = 0;
    for (size_t i = 0; i < g.value_count(); ++i) {
      const host::Value& v = *g.value_at(i);
      if (v.kind != TDM_VALUE_PARAMETER && v.kind != TDM_VALUE_STATE) continue;
      if (v.type.dtype != TDM_F32) continue;
      EXPECT_EQ(read(a, v.name), read(b, v.name)) << v.name;
      ++compared;
    }
    EXPECT_GT(compared, 20u);
  }

  std::string text_;
  std::vector<double> losses_;
};

TEST_P(Streaming, TrainsBitIdenticallyWithNoStateLeftOnTheDevice) {
  auto resident = trained(kNone);
  auto streamed = trained(kEvery);
  ASSERT_TRUE(resident.ok()) << resident.error().message;
  ASSERT_TRUE(streamed.ok()) << streamed.error().message;
  EXPECT_EQ(losses_[0], losses_[1]);
  expect_identical(**resident, **streamed);
  const host::exec::MemoryEstimate& r = (*resident)->executor().plan().estimate;
  const host::exec::MemoryEstimate& s = (*streamed)->executor().plan().estimate;
  // What stays: the scalars every update shares (learning rate, step).
  EXPECT_EQ(s.parameters + s.gradients, 0u);
  EXPECT_LE(s.optimizer_state, 16u);
  EXPECT_EQ(s.streamed_home + s.optimizer_state, r.parameters + r.gradients + r.optimizer_state);
  EXPECT_GT(s.window, 0u);
  EXPECT_LT(s.total, r.total);
  // Each step fetches every parameter at least for forward and its update,
  // with the update's moments; and writes home every parameter, gradient
  // and moment.
  const host::exec::StreamStats stats = (*streamed)->executor().stream_stats();
  std::cout << GetParam() << ": planned " << r.total << " B resident, " << s.total << " B streamed (window "
            << s.window << " B); " << stats.copies << " copies, " << stats.fetched_bytes << " B in, "
            << stats.written_home_bytes << " B home" << std::endl;
  EXPECT_GE(stats.fetched_bytes, 5u * (2 * r.parameters + s.streamed_home - r.parameters - r.gradients));
  EXPECT_GE(stats.written_home_bytes, 5u * s.streamed_home);
}

// A GPU orders the copies with events, the host never waiting
// (streamed_state.hpp); a CPU backend's synchronous streams run that path
// too, each copy inline: the same numbers.
TEST_P(Streaming, OrderingTheCopiesByEventsAsOnAGpuTrainsTheSame) {
  auto resident = trained(kNone, {"features.grad_accum.steps=2"});
  ASSERT_TRUE(resident.ok()) << resident.error().message;
  setenv("TANDEM_STREAM_ORDERING", "events", 1);
  auto streamed = trained(kEvery, {"features.grad_accum.steps=2"});
  unsetenv("TANDEM_STREAM_ORDERING");
  ASSERT_TRUE(streamed.ok()) << streamed.error().message;
  EXPECT_EQ(losses_[0], losses_[1]);
  expect_identical(**resident, **streamed);
  EXPECT_GT((*streamed)->executor().stream_stats().fetched_bytes, 0u);
  setenv("TANDEM_STREAM_ORDERING", "sideways", 1);
  auto bad = trained(kEvery);
  unsetenv("TANDEM_STREAM_ORDERING");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("TANDEM_STREAM_ORDERING='sideways': expected events or worker"),
            std::string::npos)
      << bad.error().message;
}

TEST_P(Streaming, ComposesWithGradientAccumulationAndCheckpointing) {
  const std::vector<std::string> features = {"features.grad_accum.steps=2",
                                             "features.checkpointing.segments=\"blocks\""};
  auto resident = trained(kNone, features);
  auto streamed = trained(kEvery, features);
  ASSERT_TRUE(resident.ok()) << resident.error().message;
  ASSERT_TRUE(streamed.ok()) << streamed.error().message;
  EXPECT_EQ(losses_[0], losses_[1]);
  expect_identical(**resident, **streamed);
}

TEST_P(Streaming, MeetsABudgetTheResidentRunIsRefusedUnderAndItsPlanIsWhatIsMeasured) {
  auto probe = trained(kEvery);
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  const uint64_t planned = (*probe)->executor().plan().estimate.total;
  const uint64_t budget = planned + planned / 20;
  probe->reset();  // the device's peak is of the next run alone
  const std::string device = GetParam() + ":0";
  auto resident = trained(kNone, {}, {{device, budget}});
  ASSERT_FALSE(resident.ok()) << "the resident run must not fit for this test to mean anything";
  EXPECT_EQ(resident.error().status, TDM_OUT_OF_MEMORY);
  auto streamed = trained(kEvery, {}, {{device, budget}});
  ASSERT_TRUE(streamed.ok()) << streamed.error().message;
  const double plan = static_cast<double>((*streamed)->executor().plan().estimate.total);
  const double measured = static_cast<double>((*streamed)->training_peaks().at(device));
  std::cout << device << " streamed: planned " << plan << " B, measured peak " << measured << " B ("
            << 100.0 * (measured - plan) / plan << "%)" << std::endl;
  EXPECT_LE(measured, plan);
  EXPECT_GE(measured, 0.98 * plan);
}

// Mixed precision (f16 with a dynamic loss scale on reference, bf16 on
// onednn where the CPU has it): the master weights stream in f32, and a
// step skipped on overflow runs only part of the optimizer phase.
TEST_P(Streaming, ComposesWithMixedPrecision) {
  const bool onednn = GetParam() == "onednn";
  if (onednn && !no_bf16_reason("onednn").empty()) GTEST_SKIP() << no_bf16_reason("onednn");
  const std::vector<std::string> amp = {onednn ? "features.amp.dtype=\"bf16\"" : "features.amp.dtype=\"f16\"",
                                        "features.amp.loss_scale=\"dynamic\""};
  auto resident = trained(kNone, amp);
  auto streamed = trained(kEvery, amp);
  ASSERT_TRUE(resident.ok()) << resident.error().message;
  ASSERT_TRUE(streamed.ok()) << streamed.error().message;
  EXPECT_EQ(losses_[0], losses_[1]);
  expect_identical(**resident, **streamed);
  EXPECT_EQ((*streamed)->executor().plan().estimate.parameters, 0u);
}

// Quantization-aware training: the fake-quantized weights are computed from
// the streamed f32 weights on the device, the observers' state streams too.
TEST_P(Streaming, ComposesWithQuantizationAwareTraining) {
  const std::vector<std::string> qat = {"features.quantize.mode=qat", "features.quantize.per_channel=true"};
  auto resident = trained(kNone, qat);
  auto streamed = trained(kEvery, qat);
  ASSERT_TRUE(resident.ok()) << resident.error().message;
  ASSERT_TRUE(streamed.ok()) << streamed.error().message;
  EXPECT_EQ(losses_[0], losses_[1]);
  expect_identical(**resident, **streamed);
}

// A run resumed from a streamed run's checkpoint continues it exactly:
// checkpoints are read from and written to the values' homes.
TEST_P(Streaming, ResumesExactly) {
  auto whole = trained(kEvery);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  auto first = trained(kEvery, {"train.steps=3"});
  ASSERT_TRUE(first.ok()) << first.error().message;
  options_.resume = dir_.file("run" + std::to_string(specs_.size()));
  auto rest = trained(kEvery);
  options_.resume.clear();
  ASSERT_TRUE(rest.ok()) << rest.error().message;
  EXPECT_EQ(losses_[0], losses_[2]);
  expect_identical(**whole, **rest);
}

// Without --stream-params or --no-stream, a run over its budget streams
// the fewest layers, largest first, that make it fit, and says so.
TEST_P(Streaming, ARunOverItsBudgetStreamsTheFewestLayersThatMakeItFit) {
  auto resident = trained(kNone);
  ASSERT_TRUE(resident.ok()) << resident.error().message;
  const host::exec::MemoryEstimate& r = (*resident)->executor().plan().estimate;
  // The largest layer is the tied embedding and head (256 x 32 weights and
  // their AdamW state): streaming it alone frees about 96 KiB.
  const uint64_t budget = r.total - 32 * 1024;
  auto automatic = trained(kAuto, {}, {{GetParam() + ":0", budget}});
  ASSERT_TRUE(automatic.ok()) << automatic.error().message;
  const std::set<std::string>& streamed = (*automatic)->program().streamed();
  EXPECT_EQ(streamed.count("tok.weight"), 1u);
  EXPECT_EQ(streamed.count("h.0.fc.weight"), 0u) << "one layer is enough";
  EXPECT_LE((*automatic)->executor().plan().estimate.total, budget);
  EXPECT_EQ(losses_[0], losses_[1]);
  expect_identical(**resident, **automatic);
  auto none = trained(kNone, {}, {{GetParam() + ":0", budget}});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("--stream-params"), std::string::npos) << none.error().message;
}

TEST_P(Streaming, ALayerOfTheModelFileStreamsAlone) {
  std::string model = language_model(text_);
  model.replace(model.find("name = \"fc\"\n"), 12, "name = \"fc\"\nstream = true\n");
  auto spec = host::model::parse_model_text(model, "model.toml");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  specs_.push_back(std::make_unique<host::model::ModelSpec>(std::move(*spec)));
  options_.run_dir = dir_.file("one-layer");
  options_.streaming = kAuto;
  auto t = host::train::Trainer::create(*specs_.back(), device(GetParam()), *registry_, options_);
  ASSERT_TRUE(t.ok()) << t.error().message;
  const std::set<std::string>& streamed = (*t)->program().streamed();
  EXPECT_EQ(streamed.count("h.1.fc.weight"), 1u);
  EXPECT_EQ(streamed.count("h.1.fc.weight.grad"), 1u);
  EXPECT_EQ(streamed.count("h.1.proj.weight"), 0u);
  EXPECT_EQ(streamed.count("tok.weight"), 0u);
  size_t moments = 0;
  for (const std::string& name : streamed) moments += name.rfind("optim.h.2.fc.", 0) == 0;
  EXPECT_GE(moments, 2u) << "AdamW's two moments of each streamed tensor";
  ASSERT_TRUE((*t)->run().ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, Streaming, ::testing::Values("reference", "onednn"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tandem::test
