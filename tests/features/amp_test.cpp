// The amp feature plugin through the real trainer on the reference backend
// (and onednn when built): the cast pass leaves the f32 list in f32, bf16
// training follows f32, an overflow is skipped, logged and backed off, and
// at the floor the log names the layer.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <vector>

#include "model/model_parser.hpp"
#include "training_fixture.hpp"

namespace tandem::test {
namespace {

const char* kModel = R"([model]
input = [1, 8, 8]
classes = 4
[[layers]]
name = "conv"
op = "conv2d"
out_channels = 4
kernel = 3
padding = 1
[[layers]]
name = "pool"
op = "max_pool2d"
kernel = 2
[[layers]]
name = "fc1"
op = "linear"
out_features = 32
activation = "relu"
[[layers]]
name = "fc2"
op = "linear"
out_features = 4
[train]
lr = 0.05
momentum = 0.9
batch_size = 32
steps = 12
seed = 5
[data]
format = "synthetic"
synthetic_samples = 640
synthetic_test_samples = 0
)";

class Amp : public TrainingOnReference {
 protected:
  void SetUp() override { load("amp"); }

  std::unique_ptr<host::train::Trainer> trainer(const std::vector<std::string>& overrides,
                                                const char* backend = "reference") {
    auto t = trainer_on(backend, kModel, overrides);
    EXPECT_TRUE(t.ok()) << t.error().message;
    return t.ok() ? std::move(*t) : nullptr;
  }
  static const host::Value* value(host::train::Trainer& t, const std::string& name) {
    return t.model().graph.value_by_name(name);
  }
  static float scalar(host::train::Trainer& t, const std::string& name) {
    float v = 0;
    EXPECT_TRUE(t.executor().read(value(t, name)->id, &v, sizeof v).ok());
    return v;
  }
  std::vector<float> weights(host::train::Trainer& t, const std::string& name) { return read(t, name); }
};

// The node kinds of the amp graph: which ops write bf16, how many casts
// each layer has, and the dtypes the f32 list reads.
struct AmpGraph {
  std::map<std::string, int> low, casts;
};

AmpGraph inspect(const host::Graph& g, bool wide) {
  AmpGraph r;
  const auto dtype = [&](host::ValueId v) { return g.value(v)->type.dtype; };
  for (size_t i = 0; i < g.node_count(); ++i) {
    const host::Node& n = *g.node_at(i);
    if (n.op == "cast") {
      ++r.casts[n.layer];
      continue;
    }
    bool any_low = false;
    for (host::ValueId v : n.outputs) any_low = any_low || dtype(v) == TDM_BF16;
    if (any_low) ++r.low[n.op];
    // The f32 list: loss, its gradient, weight gradients, the optimizer;
    // with wide products linear_grad_weight reads bf16 operands into f32.
    const bool wide_node = wide && n.op == "linear_grad_weight";
    if (n.op == "softmax_cross_entropy" || n.op == "softmax_cross_entropy_grad" ||
        n.op == "linear_grad_weight" || n.op == "conv2d_grad_weight" || n.op == "sgd_update") {
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (n.inputs[k] != host::kNoValue && dtype(n.inputs[k]) != TDM_S32) {
          EXPECT_EQ(dtype(n.inputs[k]), wide_node ? TDM_BF16 : TDM_F32) << n.name << " input " << k;
        }
      EXPECT_FALSE(any_low) << n.name;
    }
  }
  return r;
}

TEST_F(Amp, PassCastsComputeOpsAndKeepsTheF32List) {
  for (const bool wide : {true, false}) {
    SCOPED_TRACE(wide ? "wide products" : "wide_products = false");
    auto t = trainer({"features.amp.dtype=\"bf16\"",
                      std::string("features.amp.wide_products=") + (wide ? "true" : "false")});
    ASSERT_TRUE(t);
    const host::Graph& g = t->model().graph;
    const AmpGraph r = inspect(g, wide);
    // conv, pool, fc1 (relu fused) forward; fc1/fc2 grad_input, relu_grad,
    // pool grad backward; the head fc2 forward writes f32 (it makes the
    // logits), from bf16 operands with wide products.
    EXPECT_EQ(r.low.at("conv2d"), 1);
    EXPECT_EQ(r.low.at("max_pool2d"), 1);
    EXPECT_EQ(r.low.at("max_pool2d_grad"), 1);
    EXPECT_EQ(r.low.at("linear"), 1);
    EXPECT_EQ(r.low.at("linear_grad_input"), 2);
    EXPECT_GE(r.casts.at("conv"), 1);
    const host::Value* logits = g.value(t->model().logits);
    EXPECT_EQ(logits->type.dtype, TDM_F32);
    const host::Node& head = *g.node(logits->producer);
    EXPECT_EQ(head.op, "linear");
    EXPECT_EQ(g.value(head.inputs[0])->type.dtype, wide ? TDM_BF16 : TDM_F32) << "the head's x";
    EXPECT_EQ(g.value(head.inputs[1])->type.dtype, wide ? TDM_BF16 : TDM_F32) << "the head's w";
    EXPECT_EQ(g.value(head.inputs[2])->type.dtype, TDM_F32) << "the head's bias stays f32";
    for (const char* p : {"conv.weight", "fc1.weight", "fc2.weight"}) {
      EXPECT_EQ(g.value_by_name(p)->type.dtype, TDM_F32) << p;
      const host::Value* grad = g.value_by_name(std::string(p) + ".grad");
      ASSERT_NE(grad, nullptr) << p;
      EXPECT_EQ(grad->type.dtype, TDM_F32) << p;
      EXPECT_EQ(grad->kind, TDM_VALUE_GRADIENT) << p;
    }
    // bf16's default: no loss scaling, so nothing of it in the graph.
    EXPECT_EQ(g.value_by_name("amp.loss_scale"), nullptr);
  }
}

// Tolerance 3% of the loss after 12 SGD steps: bf16 keeps 8 significant
// bits (relative rounding 2^-9 = 0.2% per op); a few rounded layers per
// step, compounded over 12 momentum steps on a 4-class problem, move the
// loss by well under 1% in practice (measured ~0.2%). The weights and the
// optimizer are f32 in both runs, so the gap does not grow with steps.
void expect_close_losses(Amp& self, double f32_loss, double low_loss, const char* what) {
  (void)self;
  std::cout << what << ": loss after 12 steps f32 " << f32_loss << ", amp " << low_loss << std::endl;
  EXPECT_NEAR(low_loss, f32_loss, 0.03 * f32_loss) << what;
}

TEST_F(Amp, Bf16TrainsLikeF32OnReference) {
  auto f32 = trainer({});
  auto bf16 = trainer({"features.amp.dtype=\"bf16\"", "features.amp.loss_scale=\"dynamic\""});
  ASSERT_TRUE(f32 && bf16);
  auto a = f32->run();
  auto b = bf16->run();
  ASSERT_TRUE(a.ok() && b.ok());
  expect_close_losses(*this, a->last_loss, b->last_loss, "reference bf16");
  EXPECT_EQ(scalar(*bf16, "amp.loss_scale"), 65536.0f) << "no overflow, no growth within 12 steps";
}

// A language model: attention, rope and the MLP run in bf16; the logits
// (behind the per-token loss's reshapes) and the tied head stay f32.
// Wide products keep fewer f32 copies of bf16 activations alive for the
// weight gradients, and train as the f32 products do within bf16's noise.
TEST_F(Amp, WideProductsTrainLikeF32ProductsWithFewerCasts) {
  auto wide = trainer({"features.amp.dtype=\"bf16\""});
  auto narrow = trainer({"features.amp.dtype=\"bf16\"", "features.amp.wide_products=false"});
  ASSERT_TRUE(wide && narrow);
  size_t wide_casts = 0, narrow_casts = 0;
  for (size_t i = 0; i < wide->model().graph.node_count(); ++i)
    wide_casts += wide->model().graph.node_at(i)->op == "cast";
  for (size_t i = 0; i < narrow->model().graph.node_count(); ++i)
    narrow_casts += narrow->model().graph.node_at(i)->op == "cast";
  EXPECT_LT(wide_casts, narrow_casts);
  auto a = narrow->run();
  auto b = wide->run();
  ASSERT_TRUE(a.ok() && b.ok());
  expect_close_losses(*this, a->last_loss, b->last_loss,
                      "reference bf16, wide products against f32 products");
}

TEST_F(Amp, Bf16TrainsALanguageModelLikeF32) {
  const std::string text = ::testing::TempDir() + "/amp_lm.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 60; ++i) out << "all that glitters is not gold. ";
  }
  const std::string lm = std::string(R"([model]
task = "language_model"
context = 16
vocab_size = 256
[[layers]]
name = "tok"
op = "embedding"
num_embeddings = 256
embedding_dim = 16
init_std = 0.02
[[layers]]
name = "attn"
op = "attention"
heads = 2
rope = true
[[layers]]
name = "res"
op = "add"
inputs = ["tok", "attn"]
[[layers]]
name = "fc"
op = "linear"
out_features = 16
[[layers]]
name = "act"
op = "silu"
[[layers]]
name = "head"
op = "linear"
out_features = 256
tie_weight = "tok"
[train]
optimizer = "adamw"
lr = 0.01
batch_size = 8
steps = 12
seed = 5
[data]
format = "tokens"
train_tokens = ")") + text +
                         "\"\n";
  auto f32 = trainer_on("reference", lm, {});
  auto bf16 = trainer_on("reference", lm, {"features.amp.dtype=\"bf16\""});
  ASSERT_TRUE(f32.ok()) << f32.error().message;
  ASSERT_TRUE(bf16.ok()) << bf16.error().message;
  const host::Graph& g = (*bf16)->model().graph;
  const host::Node* attention = g.node_by_name("attn.attention.bf16");
  ASSERT_NE(attention, nullptr) << "the attention node was not converted";
  EXPECT_EQ(g.value(attention->outputs[0])->type.dtype, TDM_BF16);
  EXPECT_EQ(g.value(attention->outputs[1])->type.dtype, TDM_F32) << "the log-sum-exp stays f32";
  EXPECT_EQ(g.value((*bf16)->model().logits)->type.dtype, TDM_F32) << "the logits stay f32";
  auto a = (*f32)->run();
  auto b = (*bf16)->run();
  ASSERT_TRUE(a.ok() && b.ok());
  expect_close_losses(*this, a->last_loss, b->last_loss, "language model, reference bf16");
}

TEST_F(Amp, Bf16TrainsLikeF32OnOnednn) {
  if (registry_->find("onednn") == nullptr) GTEST_SKIP() << "onednn is not part of this build";
  if (const std::string why = no_bf16_reason("onednn"); !why.empty())
    GTEST_SKIP() << why << "; Amp.Bf16StopsBeforeTrainingOnACpuWithoutIt covers such a CPU";
  auto f32 = trainer({}, "onednn");
  auto bf16 = trainer({"features.amp.dtype=\"bf16\""}, "onednn");
  ASSERT_TRUE(f32 && bf16);
  auto a = f32->run();
  auto b = bf16->run();
  ASSERT_TRUE(a.ok() && b.ok());
  expect_close_losses(*this, a->last_loss, b->last_loss, "onednn bf16");
}

// A CPU without AVX-512 (every machine under ONEDNN_MAX_CPU_ISA=AVX2): amp
// stops before the first step, naming the node, the missing CPU feature and
// what to do, rather than passing on oneDNN's own words.
TEST_F(Amp, Bf16StopsBeforeTrainingOnACpuWithoutIt) {
  if (registry_->find("onednn") == nullptr) GTEST_SKIP() << "onednn is not part of this build";
  if (no_bf16_reason("onednn").empty())
    GTEST_SKIP()
        << "onednn:0 has bf16 kernels on this CPU; the isa_avx2 run of this test covers a CPU without";
  auto bf16 = trainer_on("onednn", kModel, {"features.amp.dtype=\"bf16\""});
  ASSERT_FALSE(bf16.ok()) << "training must not start";
  const std::string& m = bf16.error().message;
  EXPECT_NE(m.find("backend onednn cannot run node 'conv.bf16' of layer 'conv'"), std::string::npos) << m;
  EXPECT_NE(m.find("in bf16: this CPU has no bf16 kernels in oneDNN: they need AVX-512"), std::string::npos)
      << m;
  EXPECT_NE(m.find("avx2"), std::string::npos) << m;
  EXPECT_NE(m.find("without [features.amp]"), std::string::npos) << m;
  EXPECT_EQ(m.find("primitive descriptor"), std::string::npos) << "oneDNN's own words: " << m;
}

TEST_F(Amp, F16TrainsLikeF32OnReference) {
  auto f32 = trainer({});
  auto f16 = trainer({"features.amp.dtype=\"f16\""});
  ASSERT_TRUE(f32 && f16);
  auto a = f32->run();
  auto b = f16->run();
  ASSERT_TRUE(a.ok() && b.ok());
  expect_close_losses(*this, a->last_loss, b->last_loss, "reference f16");
}

TEST_F(Amp, OverflowIsSkippedLoggedBackedOffAndNamedAtTheFloor) {
  // f16 tops out at 65504: a scale of 2^100 overflows every gradient. With
  // hysteresis 2 and a back-off of 2^-10 the scale reaches the floor 2^80 at
  // step 4 (powers of two: exact in f32 and double).
  auto t =
      trainer({"features.amp.dtype=\"f16\"", "features.amp.initial_scale=1267650600228229401496703205376",
               "features.amp.min_scale=1208925819614629174706176", "features.amp.backoff=0.0009765625",
               "train.steps=6"});
  ASSERT_TRUE(t);
  const auto before = weights(*t, "fc1.weight");
  ::testing::internal::CaptureStderr();
  auto r = t->run();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(weights(*t, "fc1.weight"), before) << "every step overflowed, so none may move the weights";
  EXPECT_NE(
      log.find("step 1: gradients overflowed (in layer(s) 'fc1', 'conv'); step skipped, loss scale stays"),
      std::string::npos)
      << log;
  EXPECT_NE(log.find("step 2: gradients overflowed (in layer(s) 'fc1', 'conv'); step skipped, loss scale "
                     "1.26765e+30 -> 1.23794e+27"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("step 3: gradients overflowed with the loss scale at its floor"), std::string::npos)
      << log;
  for (const char* step : {"step 4", "step 5", "step 6"})
    EXPECT_NE(log.find(std::string(step) +
                       ": gradients overflowed with the loss scale at its floor (min_scale 1.20893e+24) in "
                       "layer(s) 'fc1', 'conv' (fc1.weight.grad"),
              std::string::npos)
        << log;
  EXPECT_EQ(scalar(*t, "amp.loss_scale"), std::ldexp(1.0f, 80));
  EXPECT_EQ(scalar(*t, "amp.inv_scale"), std::ldexp(1.0f, -80));
}

TEST_F(Amp, ScaleGrowsAfterCleanSteps) {
  auto t = trainer(
      {"features.amp.dtype=\"f16\"", "features.amp.initial_scale=256", "features.amp.growth_interval=4"});
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->run().ok());
  EXPECT_FLOAT_EQ(scalar(*t, "amp.loss_scale"), 256.0f * 8) << "12 clean steps, growth every 4";
}

TEST_F(Amp, ComposesWithGradAccum) {
  if (registry_->find("grad_accum") == nullptr) GTEST_SKIP() << "grad_accum is not part of this build";
  auto f32 = trainer({});
  auto both = trainer({"features.amp.dtype=\"f16\"", "features.grad_accum.steps=2", "train.batch_size=16"});
  ASSERT_TRUE(f32 && both);
  // amp (after autodiff) unscaled the gradients grad_accum (after the
  // optimizer) then accumulates; amp's overflow sums span the micro-batches.
  EXPECT_NE(value(*both, "grad_accum.fc1.weight.grad"), nullptr);
  EXPECT_NE(value(*both, "amp.overflow.fc1.weight.grad"), nullptr);
  auto a = f32->run();
  auto b = both->run();
  ASSERT_TRUE(a.ok() && b.ok()) << (b.ok() ? "" : b.error().message);
  expect_close_losses(*this, a->last_loss, b->last_loss, "f16 + grad_accum 2x16 vs f32 1x32");
}

// An overflowed, skipped step must leave grad_accum's accumulators clean:
// the next steps train (a clear by scale 0 would turn the inf into NaN for good).
TEST_F(Amp, AStepSkippedUnderGradAccumLeavesTheAccumulatorsClean) {
  if (registry_->find("grad_accum") == nullptr) GTEST_SKIP() << "grad_accum is not part of this build";
  // 2^100 overflows f16 at once; one back-off by 2^-90 (hysteresis 1) gives 2^10, which does not.
  auto t =
      trainer({"features.amp.dtype=\"f16\"", "features.amp.initial_scale=1267650600228229401496703205376",
               "features.amp.backoff=8.077935669463161e-28", "features.amp.hysteresis=1",
               "features.grad_accum.steps=2", "train.batch_size=16", "train.steps=6"});
  ASSERT_TRUE(t);
  const auto before = weights(*t, "fc1.weight");
  ::testing::internal::CaptureStderr();
  auto r = t->run();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(log.find("step 1: gradients overflowed"), std::string::npos) << log;
  EXPECT_EQ(log.find("step 2: gradients overflowed"), std::string::npos) << log;
  EXPECT_TRUE(std::isfinite(r->last_loss));
  EXPECT_NE(weights(*t, "fc1.weight"), before) << "steps 2-6 must train";
  for (float w : weights(*t, "fc1.weight")) ASSERT_TRUE(std::isfinite(w));
  EXPECT_EQ(scalar(*t, "amp.loss_scale"), 1024.0f);
}

TEST_F(Amp, BadKeysAreNamed) {
  auto spec = host::model::parse_model_text(kModel, "amp.toml", {"features.amp.dtype=\"fp8\""});
  ASSERT_TRUE(spec.ok());
  host::train::TrainOptions o;
  o.run_dir = dir_.file("bad");
  auto t = host::train::Trainer::create(*spec, device("reference"), *registry_, o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("[features.amp] dtype = 'fp8': expected \"bf16\" or \"f16\""),
            std::string::npos)
      << t.error().message;
}

}  // namespace
}  // namespace tandem::test
