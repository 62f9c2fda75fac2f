// Tensor parallelism end to end: `mpiexec -np 2 tandem train` of a model
// whose linear layers are split Megatron-style (column-parallel without
// gather, row-parallel, column-parallel with gather) matches one process
// training the same layers whole: same losses, same evaluation, and the same
// weights after 10 steps (within 1e-5: the row-parallel layer sums its two
// partial products in another order than one matmul). Checkpoints hold whole
// tensors, so a tensor-parallel run resumes in one process. Also what every
// rank must do alike: clip by the whole model's norm, skip the same steps;
// and what each must not: draw one dropout mask for all the slices.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <regex>
#include <string>

#include "checkpoint/safetensors.hpp"
#include "lowering/model_graph.hpp"
#include "model/model_parser.hpp"
#include "parallel_runs.hpp"
#include "temp_dir.hpp"
#include "train/checkpointing.hpp"

namespace tandem::test {
namespace {

const char* kModel = R"([model]
name = "tp"
input = [8]
classes = 4
[[layers]]
name = "fc1"
op = "linear"
out_features = 16
activation = "relu"
parallel = "column"
gather_output = false
[[layers]]
name = "fc2"
op = "linear"
out_features = 12
activation = "tanh"
parallel = "row"
[[layers]]
name = "fc3"
op = "linear"
out_features = 4
parallel = "column"
[train]
lr = 0.05
momentum = 0.9
batch_size = 32
steps = 10
log_every = 1
seed = 5
[data]
format = "synthetic"
synthetic_samples = 512
synthetic_test_samples = 64
)";

// The running mean loss at every step and the evaluation loss, from a run's
// metrics.jsonl, to 4 significant digits.
std::vector<std::string> losses(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> found;
  const std::regex loss("\"(loss|eval_loss)\":([0-9.e-]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), loss); it != std::sregex_iterator(); ++it) {
    char rounded[32];
    std::snprintf(rounded, sizeof rounded, "%s %.4g", (*it)[1].str().c_str(), std::stod((*it)[2]));
    found.push_back(rounded);
  }
  return found;
}

// A small language model's file: a token embedding (+ `embedding`),
// positions, attention split by heads (+ `attention`), a residual, then
// `rest` (the MLP and the head), trained on the tokens of `text`.
std::string language_model(const std::string& embedding, const std::string& attention,
                           const std::string& rest, const std::string& text) {
  return R"([model]
name = "tp"
task = "language_model"
context = 8
vocab_size = 256
[[layers]]
name = "tok"
op = "embedding"
num_embeddings = 256
embedding_dim = 16
init_std = 0.02
)" + embedding +
         R"([[layers]]
name = "pos"
op = "position_embedding"
[[layers]]
name = "attn"
op = "attention"
heads = 4
parallel = "heads"
)" + attention +
         R"([[layers]]
name = "res"
op = "add"
inputs = ["pos", "attn"]
)" + rest +
         R"([train]
optimizer = "adamw"
lr = 0.01
batch_size = 8
steps = 10
seed = 4
[data]
format = "tokens"
train_tokens = ")" +
         text + R"("
windows_per_epoch = 80
)";
}

class TensorParallel : public MpiRuns {
 protected:
  void SetUp() override {
    MpiRuns::SetUp();
    if (IsSkipped()) return;
    std::ofstream(dir.file("tp.toml")) << kModel;
  }
  std::string tandem(const std::string& device = "reference") const {
    return std::string("env -u TANDEM_PLUGIN_PATH '") + TANDEM_EXE + "' --allow-insecure-plugins train " +
           dir.file("tp.toml") + " --device " + device;
  }
  // A small language model on a repeated sentence (into tp.toml).
  void write_language_model(const std::string& embedding, const std::string& attention,
                            const std::string& rest) {
    {
      std::ofstream text(dir.file("text.txt"));
      for (int i = 0; i < 80; ++i) text << "many hands make light work. ";
    }
    std::ofstream(dir.file("tp.toml")) << language_model(embedding, attention, rest, dir.file("text.txt"));
  }
  std::string ranks(int n, const std::string& device = "reference") const {
    return "env -u TANDEM_PLUGIN_PATH '" TANDEM_MPIEXEC "' -np " + std::to_string(n) +
           " --oversubscribe --allow-run-as-root " + tandem(device);
  }
  std::string two_ranks() const { return ranks(2); }
  TempDir dir;
};

TEST_F(TensorParallel, SplitLinearLayersOverTwoRanksMatchOneProcess) {
  CliRun one = shell(tandem() + " --run-dir " + dir.file("one"));
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun two = shell(two_ranks() + " --run-dir " + dir.file("two"));
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_NE(two.output.find("parallel layers split over 2 ranks"), std::string::npos) << two.output;
  EXPECT_EQ(count_of(two.output, "training tp"), 1u) << "only rank 0 reports:\n" << two.output;
  // Forward: the same loss at every step and the same evaluation.
  EXPECT_EQ(losses(dir.file("one")), losses(dir.file("two")));
  EXPECT_EQ(losses(dir.file("one")).size(), 11u);
  // Backward: the same updates, so the same whole weights in the checkpoint.
  auto cp = host::checkpoint::read_safetensors(*host::train::latest_checkpoint(dir.file("two")));
  ASSERT_TRUE(cp.ok()) << cp.error().message;
  ASSERT_NE(cp->find("fc2.weight"), nullptr);
  EXPECT_EQ(cp->find("fc1.weight")->shape, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(cp->find("fc2.weight")->shape, (std::vector<int64_t>{12, 16}));
  EXPECT_EQ(cp->find("optim.fc2.weight.momentum")->shape, (std::vector<int64_t>{12, 16}));
  const double worst = largest_difference(dir.file("one"), dir.file("two"));
  std::cout << "largest weight difference, tensor parallel over 2 ranks vs one process, after 10 steps: "
            << worst << "\n";
  EXPECT_LE(worst, 1e-5);
}

// A feature's file under tensor parallelism (run_save_tensors): the EMA
// example's ema.safetensors holds every weight whole, the ranks' slices
// gathered as a checkpoint's are, equal to the averages the last
// checkpoint holds; one process evaluates it.
TEST_F(TensorParallel, AFeaturesFileHoldsWholeTensorsGatheredFromTheSlices) {
  CliRun two =
      shell(two_ranks() + " --plugin-path '" TANDEM_TEST_FEATURE_DIR "' --feature ema:decay=0.5 --run-dir " +
            dir.file("ema"));
  ASSERT_EQ(two.code, 0) << two.output;
  expect_whole_averages(dir.file("ema"),
                        {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"},
                        dir.file("tp.toml"));
  auto file = host::checkpoint::read_safetensors(dir.file("ema") + "/ema.safetensors");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->find("fc1.weight")->shape, (std::vector<int64_t>{16, 8}));
}

// Streamed parameters under tensor parallelism: each rank streams its own
// shard from its host memory, and the ranks train exactly as resident ones.
TEST_F(TensorParallel, EachRankStreamsItsShardAndTrainsAsResidentRanksDo) {
  CliRun resident = shell(two_ranks() + " --run-dir " + dir.file("resident"));
  ASSERT_EQ(resident.code, 0) << resident.output;
  CliRun streamed = shell(two_ranks() + " --stream-params --memory-report --run-dir " + dir.file("streamed"));
  ASSERT_EQ(streamed.code, 0) << streamed.output;
  EXPECT_NE(streamed.output.find("streamed per training step"), std::string::npos) << streamed.output;
  EXPECT_EQ(losses(dir.file("resident")), losses(dir.file("streamed")));
  EXPECT_EQ(largest_difference(dir.file("resident"), dir.file("streamed")), 0.0);
}

// Dropout under tensor parallelism, as lowered for each rank: on a rank's
// slice of an activation (after a column-parallel linear) and inside
// attention split by heads, each rank draws from its own seed, so the
// slices' masks are not copies of one another (with one seed, rank 1's
// half of fc1 was dropped exactly where rank 0's half was); on a whole
// activation every rank keeps the seed one process uses, so that activation
// stays the same on every rank.
std::map<std::string, int64_t> dropout_seeds(const std::string& model_text, int rank, int ranks) {
  auto spec = host::model::parse_model_text(model_text, "dropout.toml");
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  if (!spec.ok()) return {};
  auto model = host::lowering::build_forward(*spec, 8, host::lowering::Mode::Train, TDM_F32,
                                             host::lowering::TensorParallel{rank, ranks});
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) return {};
  std::map<std::string, int64_t> seeds;
  for (size_t i = 0; i < model->graph.node_count(); ++i) {
    const host::Node& n = *model->graph.node_at(i);
    for (const host::Attr& a : n.attrs)
      if (a.name == "seed") seeds[n.layer] = std::get<int64_t>(a.value);
  }
  return seeds;
}

TEST(TensorParallelLowering, DropoutOnARanksSliceDrawsFromItsOwnSeed) {
  const std::string model = language_model("", "dropout = 0.1\n", R"([[layers]]
name = "fc1"
op = "linear"
out_features = 32
parallel = "column"
gather_output = false
[[layers]]
name = "sliced"
op = "dropout"
p = 0.1
[[layers]]
name = "fc2"
op = "linear"
out_features = 16
parallel = "row"
[[layers]]
name = "whole"
op = "dropout"
p = 0.1
[[layers]]
name = "head"
op = "linear"
out_features = 256
)",
                                           "unused.txt");
  const auto one = dropout_seeds(model, 0, 1), rank0 = dropout_seeds(model, 0, 2),
             rank1 = dropout_seeds(model, 1, 2);
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(rank0.size(), 3u);
  ASSERT_EQ(rank1.size(), 3u);
  EXPECT_NE(rank0.at("attn"), rank1.at("attn"));
  EXPECT_NE(rank0.at("sliced"), rank1.at("sliced"));
  EXPECT_EQ(rank0.at("whole"), rank1.at("whole"));
  EXPECT_EQ(rank0.at("whole"), one.at("whole"));
}

// `tandem plan --ranks N` plans one rank of an N-process run without
// launching it: a column-parallel layer holds 1/N of its weights there.
TEST(TensorParallelPlan, ARanksShareIsPlannedWithoutLaunchingIt) {
  TempDir dir;
  std::ofstream(dir.file("tp.toml")) << kModel;
  const std::string plan = "env -u TANDEM_PLUGIN_PATH '" + std::string(TANDEM_EXE) +
                           "' --allow-insecure-plugins plan " + dir.file("tp.toml") + " --device reference";
  const std::regex fc1_bytes("fc1 +linear +reference:0 +([0-9]+) B");
  std::smatch m;
  CliRun whole = shell(plan);
  ASSERT_EQ(whole.code, 0) << whole.output;
  ASSERT_TRUE(std::regex_search(whole.output, m, fc1_bytes)) << whole.output;
  EXPECT_EQ(m[1], "576") << "weight 16 x 8 and bias 16, f32";
  EXPECT_EQ(whole.output.find("one rank of"), std::string::npos) << whole.output;
  CliRun half = shell(plan + " --ranks 2");
  ASSERT_EQ(half.code, 0) << half.output;
  ASSERT_TRUE(std::regex_search(half.output, m, fc1_bytes)) << half.output;
  EXPECT_EQ(m[1], "288");
  EXPECT_NE(half.output.find("one rank of 2: the layers marked parallel hold 1/2 of their weights here"),
            std::string::npos)
      << half.output;
  CliRun zero = shell(plan + " --ranks 0");
  EXPECT_EQ(zero.code, 2) << zero.output;
  EXPECT_NE(zero.output.find("--ranks must be at least 1"), std::string::npos) << zero.output;
  // Four ranks in groups of two: a group's share, the same as two ranks'.
  CliRun groups = shell(plan + " --ranks 4 --set train.tensor_parallel=2");
  ASSERT_EQ(groups.code, 0) << groups.output;
  ASSERT_TRUE(std::regex_search(groups.output, m, fc1_bytes)) << groups.output;
  EXPECT_EQ(m[1], "288");
  EXPECT_NE(groups.output.find("one rank of 4: the layers marked parallel hold 1/2 of their weights here "
                               "(tensor parallelism, in each of 2 groups with a batch of its own: data "
                               "parallelism)"),
            std::string::npos)
      << groups.output;
}

TEST_F(TensorParallel, UnderMpiexecRankZeroAlonePrintsThePlan) {
  CliRun launched =
      shell("env -u TANDEM_PLUGIN_PATH '" TANDEM_MPIEXEC "' -np 2 --oversubscribe --allow-run-as-root '" +
            std::string(TANDEM_EXE) + "' --allow-insecure-plugins plan " + dir.file("tp.toml") +
            " --device reference");
  ASSERT_EQ(launched.code, 0) << launched.output;
  EXPECT_EQ(count_of(launched.output, "plan for"), 1u) << launched.output;
  EXPECT_NE(launched.output.find("one rank of 2: the layers marked parallel"), std::string::npos)
      << launched.output;
}

// Clipping by the global norm: each rank holds a slice of the split
// weights and the whole of the others, so the norm is the slices' sums
// added over the ranks plus the others'. With each rank's own norm the
// ranks clipped by different coefficients (the losses parted from one
// process's at the second step).
TEST_F(TensorParallel, ClippingByTheGlobalNormMatchesOneProcess) {
  const std::string clip = " --set train.clip_grad_norm=0.05";
  CliRun unclipped = shell(tandem() + " --run-dir " + dir.file("unclipped"));
  ASSERT_EQ(unclipped.code, 0) << unclipped.output;
  CliRun one = shell(tandem() + clip + " --run-dir " + dir.file("one"));
  ASSERT_EQ(one.code, 0) << one.output;
  ASSERT_NE(losses(dir.file("one")), losses(dir.file("unclipped")))
      << "the norm must be over 0.05, or nothing is clipped";
  CliRun two = shell(two_ranks() + clip + " --run-dir " + dir.file("two"));
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_EQ(losses(dir.file("one")), losses(dir.file("two")));
  const double worst = largest_difference(dir.file("one"), dir.file("two"));
  std::cout << "largest weight difference, clipped, tensor parallel over 2 ranks vs one process: " << worst
            << "\n";
  EXPECT_LE(worst, 1e-5);
}

// A feature decides from its rank's slices of the split layers' gradients
// (as amp's overflow check does), so it may skip a step on one rank only.
TEST_F(TensorParallel, AStepSkippedOnOneRankOnlyStopsTheRunUnlessTheRanksAgree) {
  const std::string plugins = std::string("env TANDEM_PLUGIN_PATH='") + TANDEM_TEST_FEATURE_DIR + "' ";
  expect_one_ranks_skip_stops_unless_agreed(
      plugins + "'" TANDEM_MPIEXEC "' -np 2 --oversubscribe --allow-run-as-root '" + TANDEM_EXE +
          "' --allow-insecure-plugins train " + dir.file("tp.toml") +
          " --device reference --feature testfeature:",
      dir.file("skips_"));
}

// amp in f16 with its scale held at 9e5 (min_scale). fc2 (row-parallel,
// no activation, weights of std 4) magnifies the gradient it passes back,
// so the first f16 value to overflow is in a rank's own slice of fc1's
// output gradient, which no collective sums: rank 0 overflows alone at
// step 1, rank 1 alone at step 11 (one rank only from 8e5 to 1e6; re-pick
// the scale there if the model or its data change). Both ranks skip those
// steps, as one process does, and end within f16 rounding of its weights.
TEST_F(TensorParallel, AmpSkipsTheStepsOneRankOverflowsOnEveryRankLikeOneProcess) {
  std::string model = kModel;
  const std::string fc2 = "out_features = 12\nactivation = \"tanh\"\nparallel = \"row\"\n";
  ASSERT_NE(model.find(fc2), std::string::npos);
  model.replace(model.find(fc2), fc2.size(), "out_features = 12\nparallel = \"row\"\ninit_std = 4.0\n");
  std::ofstream(dir.file("tp.toml")) << model;
  const std::string amp = " --set train.steps=20 --feature amp:dtype=f16,initial_scale=9e5,min_scale=9e5";
  CliRun one = shell(tandem() + amp + " --run-dir " + dir.file("one"));
  CliRun two = shell(two_ranks() + amp + " --run-dir " + dir.file("two"));
  expect_amp_skipped_like_one_process(one, dir.file("one"), two, dir.file("two"), 1e-3);
}

// Data and tensor parallelism together: 4 ranks in 2 groups of 2 (each
// group holds one model, its split layers halved; the groups average their
// gradients, each rank with the rank of the other group that holds the same
// slices) at batch 32 a group train like one process at batch 64.
TEST_F(TensorParallel, TwoGroupsOfTwoRanksMatchOneProcessAtTwiceTheBatch) {
  CliRun one = shell(tandem() + " --set train.batch_size=64 --run-dir " + dir.file("one"));
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun four = shell(ranks(4) + " --set train.tensor_parallel=2 --run-dir " + dir.file("four"));
  ASSERT_EQ(four.code, 0) << four.output;
  EXPECT_NE(four.output.find("batch 32 per group x 2 groups, parallel layers split over the 2 ranks of each"),
            std::string::npos)
      << four.output;
  const double worst = largest_difference(dir.file("one"), dir.file("four"));
  std::cout << "largest weight difference, 2 groups of 2 ranks x 32 vs one process x 64: " << worst << "\n";
  EXPECT_LE(worst, 1e-5);
  // The whole tensors it saved resume in one process (its 10 steps of 2
  // groups x 32 count as 20 of one process x 32).
  CliRun resumed = shell(tandem() + " --set train.steps=24 --resume " + dir.file("four"));
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("trained 24 steps"), std::string::npos) << resumed.output;
}

TEST_F(TensorParallel, AGroupSizeThatDoesNotDivideTheRanksIsRefused) {
  CliRun three = shell(ranks(3) + " --set train.tensor_parallel=2 --run-dir " + dir.file("three"));
  EXPECT_EQ(three.code, 2) << three.output;
  EXPECT_NE(three.output.find("[train] tensor_parallel = 2 does not divide the 3 ranks of this run"),
            std::string::npos)
      << three.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("three") + "/checkpoints"));
}

TEST_F(TensorParallel, ARunSplitOverTwoRanksResumesInOneProcess) {
  CliRun two = shell(two_ranks() + " --set train.steps=0 --set train.epochs=1 --run-dir " + dir.file("run"));
  ASSERT_EQ(two.code, 0) << two.output;
  CliRun one = shell(tandem() + " --set train.steps=0 --set train.epochs=2 --resume " + dir.file("run"));
  ASSERT_EQ(one.code, 0) << one.output;
  EXPECT_NE(one.output.find("epoch 2/2 done"), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("trained 32 steps"), std::string::npos) << one.output;
}

// On a device whose memory the host does not address, as a GPU's (the
// reference kernels behind the offhost test plugin), every tensor moves
// through the device's copies, the ranks join on the device's memory, and
// the checkpoint's slices are gathered through device buffers: the ranks
// train to the same bits as on the host's memory, optimizer state included.
TEST_F(TensorParallel, OnADeviceWhoseMemoryIsNotTheHostsTheRanksTrainToTheSameBits) {
  CliRun host = shell(two_ranks() + " --run-dir " + dir.file("host"));
  ASSERT_EQ(host.code, 0) << host.output;
  CliRun apart =
      shell(ranks(2, "offhost --plugin-path '" TANDEM_OFFHOST_DIR "'") + " --run-dir " + dir.file("apart"));
  ASSERT_EQ(apart.code, 0) << apart.output;
  EXPECT_NE(apart.output.find("on offhost:0"), std::string::npos) << apart.output;
  EXPECT_EQ(losses(dir.file("host")), losses(dir.file("apart")));
  EXPECT_GE(expect_same_tensors(dir.file("host"), dir.file("apart")), 13u);
}

TEST_F(TensorParallel, ALayerThatCannotReadASliceIsRefusedByName) {
  std::string model = kModel;
  model.replace(model.find("[[layers]]\nname = \"fc2\""), 0,
                "[[layers]]\nname = \"norm\"\nop = \"layer_norm\"\n");
  std::ofstream(dir.file("tp.toml")) << model;
  CliRun two = shell(two_ranks() + " --run-dir " + dir.file("bad"));
  EXPECT_NE(two.code, 0);
  EXPECT_NE(two.output.find("layer 'norm' (layer_norm): reads 'fc1'"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("row-parallel"), std::string::npos) << two.output;
}

// A vocabulary-parallel embedding (rows split over the ranks) feeding split
// linear layers, on integer token data.
TEST_F(TensorParallel, VocabularyParallelEmbeddingMatchesOneProcess) {
  {
    std::ofstream train(dir.file("train.csv")), test(dir.file("test.csv"));
    for (int i = 0; i < 256; ++i) {
      const int a = (i * 7) % 20, b = (i * 13 + 3) % 20, c = (i * 5 + 11) % 20, d = (i * 17 + 1) % 20;
      (i < 192 ? train : test) << (a + b + c + d) % 4 << "," << a << "," << b << "," << c << "," << d << "\n";
    }
  }
  std::ofstream(dir.file("tp.toml")) << R"([model]
name = "tp_embedding"
input = [4]
classes = 4
[[layers]]
name = "embed"
op = "embedding"
num_embeddings = 20
embedding_dim = 6
padding_idx = 13
parallel = "vocab"
[[layers]]
name = "fc1"
op = "linear"
out_features = 8
activation = "relu"
parallel = "column"
gather_output = false
[[layers]]
name = "fc2"
op = "linear"
out_features = 4
parallel = "row"
[train]
lr = 0.1
momentum = 0.9
batch_size = 16
steps = 10
log_every = 1
seed = 3
[data]
format = "csv"
train_csv = ")" + dir.file("train.csv") + R"("
test_csv = ")" + dir.file("test.csv") + R"("
)";
  CliRun one = shell(tandem() + " --run-dir " + dir.file("one"));
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun two = shell(two_ranks() + " --run-dir " + dir.file("two"));
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_EQ(losses(dir.file("one")), losses(dir.file("two")));
  auto cp = host::checkpoint::read_safetensors(*host::train::latest_checkpoint(dir.file("two")));
  ASSERT_TRUE(cp.ok()) << cp.error().message;
  EXPECT_EQ(cp->find("embed.weight")->shape, (std::vector<int64_t>{20, 6}));
  const double worst = largest_difference(dir.file("one"), dir.file("two"));
  std::cout << "largest weight difference, vocabulary-parallel embedding over 2 ranks vs one process: "
            << worst << "\n";
  EXPECT_LE(worst, 1e-5);
}

}  // namespace
}  // namespace tandem::test

namespace tandem::test {
namespace {

// A transformer block split Megatron-style over 2 ranks — attention by heads
// (q/k/v column-parallel, the output projection row-parallel), the MLP
// column then row — trains like one process: the same weights after 10
// steps within 1e-5, checkpoints of whole tensors.
TEST_F(TensorParallel, ATransformerBlockSplitByHeadsMatchesOneProcess) {
  write_language_model("", "kv_heads = 2\nrope = true\n", R"([[layers]]
name = "fc"
op = "linear"
out_features = 32
parallel = "column"
gather_output = false
[[layers]]
name = "act"
op = "gelu"
[[layers]]
name = "proj"
op = "linear"
out_features = 16
parallel = "row"
[[layers]]
name = "res2"
op = "add"
inputs = ["res", "proj"]
[[layers]]
name = "head"
op = "linear"
out_features = 256
tie_weight = "tok"
)");
  CliRun one = shell(tandem() + " --run-dir " + dir.file("one"));
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun two = shell(two_ranks() + " --run-dir " + dir.file("two"));
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_NE(two.output.find("parallel layers split over 2 ranks"), std::string::npos) << two.output;
  auto cp = host::checkpoint::read_safetensors(*host::train::latest_checkpoint(dir.file("two")));
  ASSERT_TRUE(cp.ok()) << cp.error().message;
  EXPECT_EQ(cp->find("attn.q.weight")->shape, (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(cp->find("attn.k.weight")->shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(cp->find("attn.out.weight")->shape, (std::vector<int64_t>{16, 16}));
  const double worst = largest_difference(dir.file("one"), dir.file("two"));
  std::cout << "largest weight difference, a transformer block over 2 ranks vs one process, after 10 steps: "
            << worst << "\n";
  EXPECT_LE(worst, 1e-5);
}

}  // namespace
}  // namespace tandem::test

namespace tandem::test {
namespace {

// Megatron's vocabulary-parallel ends of a language model: the token
// embedding split by vocabulary and an untied head split by vocabulary
// (column-parallel, its logits gathered), around attention split by heads.
TEST_F(TensorParallel, AVocabularyParallelEmbeddingAndHeadMatchOneProcess) {
  write_language_model("parallel = \"vocab\"\n", "", R"([[layers]]
name = "head"
op = "linear"
out_features = 256
parallel = "column"
)");
  CliRun one = shell(tandem() + " --run-dir " + dir.file("one"));
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun two = shell(two_ranks() + " --run-dir " + dir.file("two"));
  ASSERT_EQ(two.code, 0) << two.output;
  const double worst = largest_difference(dir.file("one"), dir.file("two"));
  std::cout
      << "largest weight difference, vocabulary-parallel embedding and head over 2 ranks vs one process: "
      << worst << "\n";
  EXPECT_LE(worst, 1e-5);
}

}  // namespace
}  // namespace tandem::test
