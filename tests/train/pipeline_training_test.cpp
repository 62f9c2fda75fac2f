// Micro-batches pipelined over two devices (exec/pipelined_executor.hpp):
// a small GPT with its embeddings and first block on reference:0 and the
// rest, the tied head among it, on onednn:0, trained with dropout and
// clipping. Every weight after the run equals, bit for bit, the run whose
// micro-batches go one after another through the same two devices (the
// gradient accumulators are summed in the same order, by the same kernels);
// a run stopped and resumed from its checkpoint continues as if it never
// stopped; the pipeline reports how busy each device was.
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <tuple>

#include "build_plugins.hpp"
#include "device/device.hpp"
#include "model/model_parser.hpp"
#include "plugin/registry.hpp"
#include "temp_dir.hpp"
#include "train/trainer.hpp"

namespace tandem::test {
namespace {

// "@PIN:layer" marks where a layer may be pinned; "@TEXT" is the text file.
const char* kModel = R"([model]
name = "pipelined"
task = "language_model"
context = 16
vocab_size = 256
[[layers]]
name = "tokens"
op = "embedding"
num_embeddings = 256
embedding_dim = 32
init = "normal"
init_std = 0.02
@PIN:tokens
[[layers]]
name = "positions"
op = "position_embedding"
@PIN:positions
[[layers]]
name = "ln1"
op = "layer_norm"
@PIN:ln1
[[layers]]
name = "attn"
op = "attention"
heads = 4
causal = true
@PIN:attn
[[layers]]
name = "attn_residual"
op = "add"
inputs = ["positions", "attn"]
@PIN:attn_residual
[[layers]]
name = "ln2"
op = "layer_norm"
[[layers]]
name = "fc"
op = "linear"
out_features = 64
activation = "tanh"
[[layers]]
name = "proj"
op = "linear"
out_features = 32
@PIN:proj
[[layers]]
name = "proj_drop"
op = "dropout"
p = 0.1
@PIN:proj_drop
[[layers]]
name = "mlp_residual"
op = "add"
inputs = ["attn_residual", "proj_drop"]
@PIN:mlp_residual
[[layers]]
name = "ln_f"
op = "layer_norm"
[[layers]]
name = "head"
op = "linear"
out_features = 256
bias = false
tie_weight = "tokens"
[train]
optimizer = "adamw"
lr = 0.003
batch_size = 8
pipeline_microbatches = 4
clip_grad_norm = 0.5
seed = 5
log_every = 1
[data]
format = "tokens"
train_tokens = "@TEXT"
windows_per_epoch = 64
)";

// The first stage's layers are pinned to `first` (the rest run on the
// trainer's device); `pinned` names them.
std::string model_text(const std::string& text_file, const std::string& first,
                       const std::set<std::string>& pinned) {
  std::string text = kModel;
  text.replace(text.find("@TEXT"), 5, text_file);
  for (size_t at = text.find("@PIN:"); at != std::string::npos; at = text.find("@PIN:")) {
    const size_t end = text.find('\n', at);
    const std::string layer = text.substr(at + 5, end - at - 5);
    text.replace(at, end - at, pinned.count(layer) ? "device = \"" + first + "\"" : "");
  }
  return text;
}

// The layers before the first block's attention: its embeddings and block
// up to the residual add (the default), or only up to its first norm (a cut
// through the residual stream).
const std::set<std::string> kWholeFirstBlock = {"tokens", "positions", "ln1",
                                                "attn",   "attn_drop", "attn_residual"};
const std::set<std::string> kUpToTheNorm = {"tokens", "positions", "ln1"};
// Two chunks a device, round robin: the embeddings and attention, the MLP's
// second half on the first; the norm and MLP's first half, the head on the
// second.
const std::set<std::string> kInterleaved = {"tokens",        "positions", "ln1",       "attn",
                                            "attn_residual", "proj",      "proj_drop", "mlp_residual"};

class PipelineTraining : public ::testing::Test {
 protected:
  void SetUp() override { open("reference", 0); }

  // The trainer's device is onednn:`index`; the first stage's layers are
  // pinned to `first`.
  void open(const std::string& first, uint32_t index) {
    first_ = first;
    registry_.emplace(build_plugins(services_));
    for (const char* needed : {"onednn", "reference", "grad_accum"})
      if (registry_->find(needed) == nullptr)
        GTEST_SKIP() << "the " << needed << " plugin is not part of this build"
                     << (index > 0 ? " or does not load as two devices (a process on one CPU)" : "");
    auto device = host::DeviceHandle::open(*registry_->find("onednn"), index);
    ASSERT_TRUE(device.ok()) << device.error().message;
    device_.emplace(std::move(*device));
    write_text();
  }
  void write_text() {
    text_ = dir_.file("text.txt");
    std::ofstream out(text_);
    for (int i = 0; i < 100; ++i) out << "a pipeline keeps every device busy, micro-batch " << i << "\n";
  }

  host::Result<std::unique_ptr<host::train::Trainer>> try_trainer(const std::string& run,
                                                                  std::vector<std::string> overrides,
                                                                  const std::string& resume = "") {
    auto spec = host::model::parse_model_text(model_text(text_, first_, pinned_), dir_.file(run + ".toml"),
                                              overrides);
    if (!spec.ok()) return spec.error();
    specs_.push_back(std::make_unique<host::model::ModelSpec>(std::move(*spec)));
    host::train::TrainOptions o;
    o.run_dir = dir_.file(run);
    o.resume = resume;
    return host::train::Trainer::create(*specs_.back(), *device_, *registry_, o);
  }
  std::unique_ptr<host::train::Trainer> trainer(const std::string& run, std::vector<std::string> overrides,
                                                const std::string& resume = "") {
    auto t = try_trainer(run, std::move(overrides), resume);
    EXPECT_TRUE(t.ok()) << t.error().message;
    return t.ok() ? std::move(*t) : nullptr;
  }
  // Both trained: the same last loss and every weight equal, bit for bit.
  static void expect_same_runs(host::train::Trainer& pipelined, host::train::Trainer& sequential) {
    auto a = pipelined.run();
    auto b = sequential.run();
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(a->last_loss, b->last_loss);
    expect_same_state(pipelined, sequential);
  }
  // Every weight of two runs, equal bit for bit.
  static void expect_same_state(host::train::Trainer& a, host::train::Trainer& b) {
    const auto x = state(a), y = state(b);
    ASSERT_EQ(x.size(), y.size());
    for (const auto& [name, values] : x) EXPECT_EQ(values, y.at(name)) << name << " differs";
  }

  // Every parameter and optimizer moment, by name.
  static std::map<std::string, std::vector<float>> state(host::train::Trainer& t) {
    std::map<std::string, std::vector<float>> all;
    const host::Graph& g = t.model().graph;
    for (size_t i = 0; i < g.value_count(); ++i) {
      const host::Value& v = *g.value_at(i);
      if ((v.kind != TDM_VALUE_PARAMETER && v.kind != TDM_VALUE_STATE) || v.type.dtype != TDM_F32) continue;
      size_t n = 1;
      for (int64_t d : v.type.dims) n *= size_t(d);
      std::vector<float> w(n);
      EXPECT_TRUE(t.executor().read(v.id, w.data(), n * sizeof(float)).ok()) << v.name;
      all[v.name] = std::move(w);
    }
    return all;
  }

  host::HostServices services_;
  std::optional<host::PluginRegistry> registry_;
  std::optional<host::DeviceHandle> device_;  // the trainer's
  std::vector<std::unique_ptr<host::model::ModelSpec>> specs_;
  TempDir dir_;
  std::string text_;
  std::string first_;
  std::set<std::string> pinned_ = kWholeFirstBlock;
};

// The onednn plugin's two cores as two devices (onednn:0 for the first
// stage, onednn:1 the trainer's device), each stage on a core of its own.
// This test's thread prepares both devices' kernels (and, unpipelined,
// launches them): a thread serving two devices is left on the CPUs it had
// (plugins/onednn/README.md), so the next test's plugin sees them all.
class PipelineOverTwoCpuDevices : public PipelineTraining {
 protected:
  void SetUp() override {
    CPU_ZERO(&cpus_);
    had_cpus_ = sched_getaffinity(0, sizeof cpus_, &cpus_) == 0;
    services_.config().set("plugins.onednn.devices", "2");
    open("onednn:0", 1);
  }
  void TearDown() override {
    cpu_set_t now;
    CPU_ZERO(&now);
    if (!had_cpus_ || sched_getaffinity(0, sizeof now, &now) != 0) return;
    EXPECT_TRUE(CPU_EQUAL(&now, &cpus_)) << "the thread that served both devices stays on one device's cores";
  }
  cpu_set_t cpus_;
  bool had_cpus_ = false;
};

// The first stage on the CPU (onednn:0), the rest on the GPU (cuda:0, the
// trainer's device): the stage on the GPU launches its segments on its
// stream, the copies between the stages go device to host and host to
// device. SKIPPED where no GPU is usable.
class PipelineOnAGpu : public PipelineTraining {
 protected:
  void SetUp() override {
    first_ = "onednn:0";
    registry_.emplace(build_plugins(services_));
    for (const char* needed : {"cuda", "onednn", "grad_accum"})
      if (registry_->find(needed) == nullptr)
        GTEST_SKIP() << "the " << needed << " plugin is not part of this build";
    auto device = host::DeviceHandle::open(*registry_->find("cuda"), 0);
    if (!device.ok()) GTEST_SKIP() << "no usable GPU: " << device.error().message;
    device_.emplace(std::move(*device));
    write_text();
  }
};

TEST_F(PipelineTraining, EqualsMicroBatchesOneAfterAnotherBitForBit) {
  auto pipelined = trainer("pipelined", {"train.steps=6"});
  auto sequential = trainer("sequential", {"train.steps=6", "train.pipeline=false"});
  ASSERT_TRUE(pipelined && sequential);
  ASSERT_NE(pipelined->program().pipeline(), nullptr) << pipelined->program().pipeline_declined();
  EXPECT_EQ(sequential->program().pipeline(), nullptr);
  EXPECT_EQ(pipelined->program().pipeline()->stage_devices(),
            (std::vector<std::string>{"reference:0", "onednn:0"}));
  expect_same_runs(*pipelined, *sequential);
}

// A stage on a GPU: the reference device driven as a device whose memory
// the host does not address (copy streams, no memcpy of its memory), then
// both devices so (through host staging). The copies take the GPU's
// routes, and the run keeps the unpipelined run's bits.
TEST_F(PipelineTraining, StagesOnDevicesTheHostDoesNotAddressGiveTheSameBits) {
  using host::exec::CopyRoute;
  struct Case {
    std::set<std::string> as_device;
    std::vector<CopyRoute> routes;
  };
  const std::vector<Case> cases = {{{"reference:0"}, {CopyRoute::DeviceToHost, CopyRoute::HostToDevice}},
                                   {{"reference:0", "onednn:0"}, {CopyRoute::DeviceToDevice}}};
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("as devices: " + std::to_string(cases[c].as_device.size()));
    auto pipelined = trainer("as-device-" + std::to_string(c), {"train.steps=4"});
    auto sequential =
        trainer("as-device-sequential-" + std::to_string(c), {"train.steps=4", "train.pipeline=false"});
    ASSERT_TRUE(pipelined && sequential);
    host::exec::PipelinedExecutor* p = pipelined->program().pipeline();
    ASSERT_NE(p, nullptr) << pipelined->program().pipeline_declined();
    host::exec::TransferOptions options;
    options.as_device = cases[c].as_device;
    ASSERT_TRUE(p->set_transfer_options(options).ok());
    expect_same_runs(*pipelined, *sequential);
    for (CopyRoute route : cases[c].routes) EXPECT_GT(p->copies(route), 0u) << host::exec::route_name(route);
    EXPECT_EQ(p->copies(CopyRoute::HostMemcpy), 0u) << "a copy read the memory of a device as host memory";
  }
}

// Mixed precision (bf16 with dynamic loss scaling, an overflow check over
// both devices' gradients) and activation checkpointing (recomputation in
// backward) compose with the pipeline: still the unpipelined run's bits.
TEST_F(PipelineTraining, ComposesWithAmpAndCheckpointing) {
  for (const char* needed : {"amp", "checkpointing"})
    if (registry_->find(needed) == nullptr)
      GTEST_SKIP() << "the " << needed << " plugin is not part of this build";
  const std::vector<std::string> features = {"train.steps=4", "features.amp.dtype=\"bf16\"",
                                             "features.amp.loss_scale=\"dynamic\"",
                                             "features.checkpointing.segments=2"};
  auto pipelined = try_trainer("amp-pipelined", features);
  if (!pipelined.ok() && pipelined.error().message.find("no bf16 kernels") != std::string::npos)
    GTEST_SKIP() << "onednn:0 has no bf16 kernels on this CPU: " << pipelined.error().message;
  ASSERT_TRUE(pipelined.ok()) << pipelined.error().message;
  auto with_off = features;
  with_off.push_back("train.pipeline=false");
  auto sequential = trainer("amp-sequential", with_off);
  ASSERT_TRUE(sequential);
  ASSERT_NE((*pipelined)->program().pipeline(), nullptr) << (*pipelined)->program().pipeline_declined();
  expect_same_runs(**pipelined, *sequential);
}

TEST_F(PipelineTraining, GradAccumsMicroBatchesArePipelinedToo) {
  auto implied = trainer("implied", {"train.steps=3"});
  auto explicit_ = trainer(
      "explicit", {"train.steps=3", "train.pipeline_microbatches=0", "features.grad_accum.micro_batch=2"});
  ASSERT_TRUE(implied && explicit_);
  ASSERT_NE(implied->program().pipeline(), nullptr) << implied->program().pipeline_declined();
  ASSERT_NE(explicit_->program().pipeline(), nullptr) << explicit_->program().pipeline_declined();
  ASSERT_TRUE(implied->run().ok());
  ASSERT_TRUE(explicit_->run().ok());
  expect_same_state(*implied, *explicit_);
}

TEST_F(PipelineTraining, AResumedRunContinuesAsIfItNeverStopped) {
  auto whole = trainer("whole", {"train.steps=8"});
  ASSERT_TRUE(whole && whole->run().ok());
  auto first = trainer("halves", {"train.steps=4"});
  ASSERT_TRUE(first && first->run().ok());
  auto second = trainer("halves-2", {"train.steps=8"}, dir_.file("halves"));
  ASSERT_TRUE(second);
  for (const auto* t : {whole.get(), first.get(), second.get()})
    ASSERT_NE(t->program().pipeline(), nullptr) << t->program().pipeline_declined();
  auto r = second->run();
  ASSERT_TRUE(r.ok()) << r.error().message;
  expect_same_state(*whole, *second);
}

TEST_F(PipelineTraining, ReportsHowBusyEachDeviceWas) {
  auto t = trainer("busy", {"train.steps=3"});
  ASSERT_TRUE(t && t->run().ok());
  const host::exec::PipelinedExecutor& p = *t->program().pipeline();
  EXPECT_EQ(p.stats().steps, 3u);
  ASSERT_EQ(p.stats().busy_us.size(), 2u);
  for (double busy : p.stats().busy_us) EXPECT_GT(busy, 0.0);
  EXPECT_GE(p.stats().idle_fraction(), 0.0);
  EXPECT_LT(p.stats().idle_fraction(), 1.0);
  // Forward and backward spans of every micro-batch on every device.
  std::set<std::tuple<size_t, size_t, bool>> seen;
  for (const host::exec::PipelineSpan& span : p.spans()) seen.insert({span.stage, span.micro, span.backward});
  EXPECT_EQ(seen.size(), 2u * 4u * 2u);
  // The reference device holds two micro-batches at once (1F1B's warm-up).
  EXPECT_EQ(p.layout().instances(0), 2u);
  EXPECT_EQ(p.layout().instances(1), 1u);
}

// Cut inside the block (as automatic placement cuts the GPT example): the
// residual stream feeds the first stage's norm and the second stage's
// residual add, and the second stage rewrites in place a gradient the first
// reads. That copy is made before the rewrite: still the unpipelined run's
// bits.
TEST_F(PipelineOverTwoCpuDevices, ACutThroughTheResidualStreamEqualsOneAfterAnother) {
  pinned_ = kUpToTheNorm;
  const std::vector<std::string> cut = {"train.steps=4"};
  auto pipelined = trainer("cut-pipelined", cut);
  auto with_off = cut;
  with_off.push_back("train.pipeline=false");
  auto sequential = trainer("cut-sequential", with_off);
  ASSERT_TRUE(pipelined && sequential);
  ASSERT_NE(pipelined->program().pipeline(), nullptr) << pipelined->program().pipeline_declined();
  const auto& pulls = pipelined->program().pipeline()->layout().pulls;
  EXPECT_TRUE(std::any_of(pulls.begin(), pulls.end(), [](const auto& p) {
    return p.rewritten != host::exec::kNoSegment;
  })) << "no copy whose source is rewritten later: the case this test is for";
  expect_same_runs(*pipelined, *sequential);
}

// Two chunks of the model on each device, round robin: the interleaved
// schedule (more micro-batches in flight, a smaller bubble), still the
// unpipelined run's bits.
TEST_F(PipelineOverTwoCpuDevices, InterleavedChunksEqualOneAfterAnother) {
  pinned_ = kInterleaved;
  auto pipelined = trainer("interleaved-pipelined", {"train.steps=4"});
  auto sequential = trainer("interleaved-sequential", {"train.steps=4", "train.pipeline=false"});
  ASSERT_TRUE(pipelined && sequential);
  const host::exec::PipelinedExecutor* p = pipelined->program().pipeline();
  ASSERT_NE(p, nullptr) << pipelined->program().pipeline_declined();
  EXPECT_GT(p->layout().instances(0), 2u) << "the interleaved schedule holds more than plain 1F1B's 2";
  expect_same_runs(*pipelined, *sequential);
}

TEST_F(PipelineOnAGpu, TheCpuStageAndTheGpuStageEqualMicroBatchesOneAfterAnother) {
  auto pipelined = trainer("gpu-pipelined", {"train.steps=6"});
  auto sequential = trainer("gpu-sequential", {"train.steps=6", "train.pipeline=false"});
  ASSERT_TRUE(pipelined && sequential);
  host::exec::PipelinedExecutor* p = pipelined->program().pipeline();
  ASSERT_NE(p, nullptr) << pipelined->program().pipeline_declined();
  EXPECT_EQ(p->stage_devices(), (std::vector<std::string>{"onednn:0", "cuda:0"}));
  expect_same_runs(*pipelined, *sequential);
  EXPECT_GT(p->copies(host::exec::CopyRoute::DeviceToHost), 0u);
  EXPECT_GT(p->copies(host::exec::CopyRoute::HostToDevice), 0u);
  EXPECT_EQ(p->copies(host::exec::CopyRoute::HostMemcpy), 0u);
}

}  // namespace
}  // namespace tandem::test
