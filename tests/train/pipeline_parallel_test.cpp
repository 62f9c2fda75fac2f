// Pipeline parallelism across ranks ([train] pipeline_parallel): `mpiexec
// tandem train` of a small GPT (tied head, dropout, clipping, AdamW) cut
// into stages, one per rank, its micro-batches run one forward, one
// backward, activations and gradients sent between the ranks. Each stage
// runs the same nodes with the same kernels and its backwards in
// micro-batch order, so the run equals one process accumulating the same
// micro-batches: the same loss at every step and the same weights, bit for
// bit. With data or tensor parallelism on a grid of 4 ranks, the same holds
// against the run without the pipeline. Each stage writes its own tensors
// into a sharded checkpoint, read whole, so a run resumes at another number
// of stages.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "checkpoint/safetensors.hpp"
#include "parallel_runs.hpp"
#include "temp_dir.hpp"

namespace tandem::test {
namespace {

const char* kModel = R"([model]
name = "gpt"
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
[[layers]]
name = "positions"
op = "position_embedding"
[[layers]]
name = "ln1"
op = "layer_norm"
[[layers]]
name = "attn"
op = "attention"
heads = 4
causal = true
[[layers]]
name = "attn_residual"
op = "add"
inputs = ["positions", "attn"]
[[layers]]
name = "ln2"
op = "layer_norm"
[[layers]]
name = "fc"
op = "linear"
out_features = 64
activation = "tanh"
@FC
[[layers]]
name = "proj"
op = "linear"
out_features = 32
@PROJ
[[layers]]
name = "proj_drop"
op = "dropout"
p = @DROPOUT
[[layers]]
name = "mlp_residual"
op = "add"
inputs = ["attn_residual", "proj_drop"]
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
pipeline_parallel = 2
clip_grad_norm = 0.5
seed = 5
steps = 50
log_every = 1
[data]
format = "tokens"
train_tokens = "@TEXT"
windows_per_epoch = 64
)";

// Every step's loss (the running mean each log line reports) from a run's metrics.jsonl.
std::vector<double> step_losses(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<double> found;
  const std::regex loss("\"loss\":([0-9.e-]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), loss); it != std::sregex_iterator(); ++it)
    found.push_back(std::stod((*it)[1]));
  return found;
}

double largest_loss_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = a.size() == b.size() && !a.empty() ? 0 : 1e9;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

class PipelineParallel : public MpiRuns {
 protected:
  void SetUp() override {
    MpiRuns::SetUp();
    if (IsSkipped()) return;
    {
      std::ofstream text(dir.file("text.txt"));
      for (int i = 0; i < 80; ++i) text << "many hands make light work. ";
    }
    write_model("", "");
  }
  // `fc` and `proj` lines: tensor parallelism's split of the MLP.
  void write_model(const std::string& fc, const std::string& proj, const std::string& dropout = "0.1") {
    std::string text = kModel;
    text.replace(text.find("@DROPOUT"), 8, dropout);
    text.replace(text.find("@TEXT"), 5, dir.file("text.txt"));
    text.replace(text.find("@FC"), 3, fc);
    text.replace(text.find("@PROJ"), 5, proj);
    std::ofstream(dir.file("gpt.toml")) << text;
  }
  // One thread per process: one process and the ranks run the same kernels alike.
  std::string tandem(const std::string& args, const std::string& device = "onednn") const {
    return "env -u TANDEM_PLUGIN_PATH OMP_NUM_THREADS=1 TANDEM_CACHE_DIR='" + dir.file("costs") + "' '" +
           TANDEM_EXE + "' --allow-insecure-plugins train " + dir.file("gpt.toml") + " --device " + device +
           " " + args;
  }
  std::string ranks(int n, const std::string& args, const std::string& device = "onednn") const {
    return "env -u TANDEM_PLUGIN_PATH OMP_NUM_THREADS=1 '" TANDEM_MPIEXEC "' -np " + std::to_string(n) +
           " --oversubscribe --allow-run-as-root " + tandem(args, device);
  }
  // The model on 4 ranks in 2 stages (the run says `grid`) trains bit for
  // bit as the same model on 2 ranks without stages.
  // `args` are both runs' further options, `grid_args` the grid's.
  void expect_grid_trains_as_without_stages(const std::string& grid_text, const std::string& args = "",
                                            const std::string& grid_args = "") {
    CliRun alone = shell(ranks(2, "--set train.pipeline_parallel=1 --run-dir " + dir.file("alone") + args));
    ASSERT_EQ(alone.code, 0) << alone.output;
    CliRun grid = shell(ranks(4, "--run-dir " + dir.file("grid") + args + grid_args));
    ASSERT_EQ(grid.code, 0) << grid.output;
    EXPECT_NE(grid.output.find(grid_text), std::string::npos) << grid.output;
    EXPECT_LE(largest_loss_difference(step_losses(dir.file("alone")), step_losses(dir.file("grid"))), 1e-6);
    EXPECT_EQ(largest_difference(dir.file("alone"), dir.file("grid")), 0.0);
  }
  // 10 steps on 2 ranks through comm plugin `plugin` (found with `args`)
  // train as through mpi, bit for bit, and its checkpoint names it. Returns
  // that run's output.
  std::string expect_trains_as_through_mpi(const std::string& plugin, const std::string& args) {
    CliRun mpi = shell(ranks(2, "--set train.steps=10 --run-dir " + dir.file("mpi")));
    EXPECT_EQ(mpi.code, 0) << mpi.output;
    CliRun other =
        shell(ranks(2, "--set train.steps=10 --comm " + plugin + args + " --run-dir " + dir.file(plugin)));
    EXPECT_EQ(other.code, 0) << other.output;
    if (mpi.code != 0 || other.code != 0) return other.output;
    auto checkpoint = host::train::read_checkpoint(*host::train::latest_checkpoint(dir.file(plugin)));
    EXPECT_TRUE(checkpoint.ok());
    if (checkpoint.ok()) {
      EXPECT_EQ(checkpoint->metadata["tandem.comm"].rfind(plugin + "=", 0), 0u)
          << checkpoint->metadata["tandem.comm"];
    }
    EXPECT_EQ(largest_loss_difference(step_losses(dir.file("mpi")), step_losses(dir.file(plugin))), 0.0);
    EXPECT_EQ(largest_difference(dir.file("mpi"), dir.file(plugin)), 0.0);
    return other.output;
  }
  TempDir dir;
};

TEST_F(PipelineParallel, TwoStagesOnTwoRanksTrainAsOneProcessAccumulatingTheMicroBatches) {
  CliRun one = shell(tandem("--run-dir " + dir.file("one")));
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun two = shell(ranks(2, "--run-dir " + dir.file("two")));
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_NE(two.output.find("layers in 2 pipeline stages: a grid of data 1 x tensor 1 x pipeline 2"),
            std::string::npos)
      << two.output;
  EXPECT_EQ(count_of(two.output, "training gpt"), 1u) << "only rank 0 reports:\n" << two.output;
  const auto a = step_losses(dir.file("one")), b = step_losses(dir.file("two"));
  ASSERT_EQ(a.size(), 50u);
  const double losses = largest_loss_difference(a, b);
  std::cout << "largest loss difference, 2 pipeline stages vs one process, 50 steps: " << losses << "\n";
  EXPECT_LE(losses, 1e-6);
  const double weights = largest_difference(dir.file("one"), dir.file("two"));
  std::cout << "largest weight difference after 50 steps: " << weights << "\n";
  EXPECT_EQ(weights, 0.0);
}

// A comm plugin of ABI 1.15 has only the blocking send and recv: the host
// runs them on threads of their own instead of starting the transfers from
// the computing thread (ABI 1.16); the messages, and so the run, are the same.
TEST_F(PipelineParallel, AnOlderCommPluginWithOnlyBlockingSendAndRecvTrainsAlike) {
  expect_trains_as_through_mpi("mpi_abi15", " --plugin-path " TANDEM_OLDER_COMM_DIR);
}

// A comm plugin that sends point to point only on the communicators it was
// told about at comm_create (as nccl, which makes its lanes then; here the
// mpi plugin so restricted, mpi_told): the stages' communicator is told,
// whether it is the one over all ranks (every rank a stage of its own) or
// each pipeline's within a grid, and the runs train as through mpi.
TEST_F(PipelineParallel, TheStagesCommunicatorIsToldItCarriesPointToPoint) {
  const std::string told = " --plugin-path " TANDEM_OLDER_COMM_DIR;
  expect_trains_as_through_mpi("mpi_told", told);
  expect_grid_trains_as_without_stages("a grid of data 2 x tensor 1 x pipeline 2", " --comm mpi_told" + told);
}

// A comm plugin of collectives only (the SDK's tcp example) carries the
// run's collectives; the stages' messages, host memory, go through mpi
// beside it, as they do beside a GPU's nccl. The same messages, the same run.
TEST_F(PipelineParallel, APluginOfCollectivesOnlyLeavesTheStagesMessagesToMpi) {
  const std::string output =
      expect_trains_as_through_mpi("tcp", " --log-level info --plugin-path " TANDEM_COMM_PLUGIN_DIR);
  EXPECT_NE(output.find("pipeline stages exchange activations through mpi: comm plugin 'tcp' does not "
                        "send point to point"),
            std::string::npos)
      << output;
}

// The whole batch at once sums the micro-batches' gradients in one go:
// close, not equal (without dropout, whose masks are drawn per micro-batch).
TEST_F(PipelineParallel, TwoStagesTrainCloseToOneProcessOnTheWholeBatch) {
  write_model("", "", "0.0");
  CliRun two = shell(ranks(2, "--run-dir " + dir.file("two")));
  ASSERT_EQ(two.code, 0) << two.output;
  CliRun whole = shell(tandem("--set train.pipeline_microbatches=0 --run-dir " + dir.file("whole")));
  ASSERT_EQ(whole.code, 0) << whole.output;
  const double whole_batch =
      largest_loss_difference(step_losses(dir.file("whole")), step_losses(dir.file("two")));
  std::cout << "largest loss difference, 2 pipeline stages vs one process on the whole batch: " << whole_batch
            << "\n";
  EXPECT_LE(whole_batch, 1e-5);
}

// [train] pipeline_cut puts the stages' boundaries where it says, instead
// of where the measured costs balance them; the run is still one process's.
TEST_F(PipelineParallel, AGivenCutBeginsTheSecondStageWhereItSays) {
  CliRun one = shell(tandem("--set train.steps=10 --run-dir " + dir.file("one")));
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun cut = shell(
      ranks(2, "--set train.steps=10 --set 'train.pipeline_cut=[\"fc\"]' --run-dir " + dir.file("cut")));
  ASSERT_EQ(cut.code, 0) << cut.output;
  CliRun plan =
      shell("env -u TANDEM_PLUGIN_PATH TANDEM_CACHE_DIR='" + dir.file("costs") + "' '" TANDEM_EXE "' plan " +
            dir.file("gpt.toml") + " --device onednn --ranks 2 --set 'train.pipeline_cut=[\"fc\"]'");
  ASSERT_EQ(plan.code, 0) << plan.output;
  EXPECT_NE(plan.output.find("stage 0 onednn:0/stage0: layers tokens .. ln2,"), std::string::npos)
      << plan.output;
  EXPECT_NE(plan.output.find("stage 1 onednn:0/stage1: layers fc .. head,"), std::string::npos)
      << plan.output;
  EXPECT_EQ(step_losses(dir.file("one")), step_losses(dir.file("cut")));
  EXPECT_EQ(largest_difference(dir.file("one"), dir.file("cut")), 0.0);
  CliRun wrong = shell(
      ranks(2, "--set train.steps=1 --set 'train.pipeline_cut=[\"tail\"]' --run-dir " + dir.file("wrong")));
  EXPECT_NE(wrong.code, 0) << wrong.output;
  EXPECT_NE(wrong.output.find("[train] pipeline_cut: 'tail' names no layer of the model"), std::string::npos)
      << wrong.output;
}

// [train] pipeline = false: the stages take the micro-batches one after
// another (no overlap), with the same result.
TEST_F(PipelineParallel, StagesThatDoNotOverlapTrainAlike) {
  CliRun pipelined = shell(ranks(2, "--set train.steps=10 --run-dir " + dir.file("pipelined")));
  ASSERT_EQ(pipelined.code, 0) << pipelined.output;
  CliRun plain =
      shell(ranks(2, "--set train.steps=10 --set train.pipeline=false --run-dir " + dir.file("plain")));
  ASSERT_EQ(plain.code, 0) << plain.output;
  EXPECT_EQ(step_losses(dir.file("pipelined")), step_losses(dir.file("plain")));
  EXPECT_EQ(largest_difference(dir.file("pipelined"), dir.file("plain")), 0.0);
}

TEST_F(PipelineParallel, DataTimesPipelineOnFourRanksTrainsAsDataParallelAlone) {
  expect_grid_trains_as_without_stages("a grid of data 2 x tensor 1 x pipeline 2");
}

// A comm plugin that joins its ranks through rank 0's rendezvous id (the
// SDK's tcp example, as nccl does) in a grid: each data-parallel group gets
// its own group's id (through MPI; then through files, one per group and
// kind of group); the stages' messages go through mpi.
TEST_F(PipelineParallel, DataTimesPipelineThroughAPluginThatJoinsByRendezvousId) {
  const std::string tcp = " --plugin-path " TANDEM_COMM_PLUGIN_DIR " --comm tcp";
  expect_grid_trains_as_without_stages("a grid of data 2 x tensor 1 x pipeline 2", tcp);
  CliRun files =
      shell(ranks(4, "--run-dir " + dir.file("files") + tcp + " --rendezvous file://" + dir.file("id")));
  ASSERT_EQ(files.code, 0) << files.output;
  for (const char* file : {"id", "id.data.group-0", "id.data.group-1"})
    EXPECT_TRUE(std::filesystem::exists(dir.file(file))) << file;
  EXPECT_EQ(largest_loss_difference(step_losses(dir.file("grid")), step_losses(dir.file("files"))), 0.0);
  EXPECT_EQ(largest_difference(dir.file("grid"), dir.file("files")), 0.0);
}

TEST_F(PipelineParallel, TensorTimesPipelineOnFourRanksTrainsAsTensorParallelAlone) {
  write_model("parallel = \"column\"\ngather_output = false\n", "parallel = \"row\"\n");
  expect_grid_trains_as_without_stages("a grid of data 1 x tensor 2 x pipeline 2");
}

// The same with tensor parallelism: each tensor-parallel group of tcp
// ranks joins through its own rank 0's id, from a file of its own.
TEST_F(PipelineParallel, TensorTimesPipelineThroughAPluginThatJoinsByRendezvousId) {
  write_model("parallel = \"column\"\ngather_output = false\n", "parallel = \"row\"\n");
  const std::string tcp = " --plugin-path " TANDEM_COMM_PLUGIN_DIR " --comm tcp";
  expect_grid_trains_as_without_stages("a grid of data 1 x tensor 2 x pipeline 2", tcp,
                                       " --rendezvous file://" + dir.file("id"));
  for (const char* file : {"id", "id.tensor.group-0", "id.tensor.group-1"})
    EXPECT_TRUE(std::filesystem::exists(dir.file(file))) << file;
}

// ZeRO stage 1 over each stage's data-parallel peers, as DeepSpeed's
// pipelines take it: a 2 x 2 grid trains bit for bit as without it, and
// the stages' files hold the optimizer state whole (gathered from the
// shards). Stages 2 and 3, whose exchanges run with every micro-batch, are
// refused.
TEST_F(PipelineParallel, ZeroStageOneShardsEachStagesOptimizerStateOverItsPeers) {
  CliRun plain = shell(ranks(4, "--memory-report --run-dir " + dir.file("plain")));
  ASSERT_EQ(plain.code, 0) << plain.output;
  CliRun zero = shell(ranks(4, "--memory-report --zero 1 --run-dir " + dir.file("zero")));
  ASSERT_EQ(zero.code, 0) << zero.output;
  // Rank 0 (stage 0) holds half its stage's optimizer state.
  const std::regex state(R"(\n  optimizer state +([0-9.]+) KiB)");
  std::smatch p, z;
  ASSERT_TRUE(std::regex_search(plain.output, p, state)) << plain.output;
  ASSERT_TRUE(std::regex_search(zero.output, z, state)) << zero.output;
  EXPECT_NEAR(std::stod(z[1]), std::stod(p[1]) / 2, 1.0) << zero.output;
  EXPECT_EQ(step_losses(dir.file("plain")), step_losses(dir.file("zero")));
  EXPECT_EQ(largest_difference(dir.file("plain"), dir.file("zero")), 0.0);
  auto a = host::train::read_checkpoint(*host::train::latest_checkpoint(dir.file("plain")));
  auto b = host::train::read_checkpoint(*host::train::latest_checkpoint(dir.file("zero")));
  ASSERT_TRUE(a.ok() && b.ok());
  size_t states = 0;
  for (const auto& t : a->tensors) {
    if (t.name.rfind("optim.", 0) != 0 || t.shape.empty()) continue;
    const auto* u = b->find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->shape, t.shape) << t.name;
    EXPECT_TRUE(u->data == t.data) << t.name;
    ++states;
  }
  EXPECT_GT(states, 10u);
  // One file: each stage's shards gathered over its peers, then sent to rank 0.
  CliRun whole = shell(ranks(4, "--zero 1 --checkpoint-format whole --run-dir " + dir.file("whole")));
  ASSERT_EQ(whole.code, 0) << whole.output;
  auto w = host::train::read_checkpoint(*host::train::latest_checkpoint(dir.file("whole")));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->tensors.size(), a->tensors.size());
  for (const auto& t : a->tensors) {
    const auto* u = w->find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_TRUE(u->data == t.data) << t.name;
  }
  CliRun two = shell(ranks(4, "--zero 2 --set train.steps=1 --run-dir " + dir.file("two")));
  EXPECT_NE(two.code, 0) << two.output;
  EXPECT_NE(
      two.output.find("[train] pipeline_parallel = 2 with [train] zero = 2 is not supported: train with "
                      "zero = 1"),
      std::string::npos)
      << two.output;
}

// Stages on devices whose memory the host does not address, as GPUs'
// (the reference kernels behind the offhost test plugin): the stages'
// messages stay in device buffers, sent by the run's comm plugin (mpi
// here, nccl on GPUs); ZeRO's shards and the tensor-parallel slices are
// gathered through device buffers, and each stage's tensors sent to rank 0
// through them, into one checkpoint file; the grids train to the bits they
// train to on the host's memory.
TEST_F(PipelineParallel, GridsOnDevicesWhoseMemoryIsNotTheHostsTrainToTheSameBits) {
  const std::string offhost = "offhost --plugin-path '" TANDEM_OFFHOST_DIR "'";
  const auto expect_same_bits = [&](const std::string& name, const std::string& args) {
    const std::string run = " --set train.steps=6 --checkpoint-format whole " + args + " --run-dir ";
    CliRun host = shell(ranks(4, run + dir.file(name + "-host"), "reference"));
    ASSERT_EQ(host.code, 0) << host.output;
    CliRun apart = shell(ranks(4, run + dir.file(name + "-apart") + " --log-level info", offhost));
    ASSERT_EQ(apart.code, 0) << apart.output;
    EXPECT_NE(
        apart.output.find("stages exchange activations on offhost:0's memory through comm plugin 'mpi'"),
        std::string::npos)
        << apart.output;
    EXPECT_EQ(step_losses(dir.file(name + "-host")), step_losses(dir.file(name + "-apart")));
    EXPECT_GT(expect_same_tensors(dir.file(name + "-host"), dir.file(name + "-apart")), 40u) << name;
  };
  expect_same_bits("zero", "--zero 1");
  write_model("parallel = \"column\"\ngather_output = false\n", "parallel = \"row\"\n");
  expect_same_bits("tensor", "--set train.tensor_parallel=2");
}

// Checkpoints read whole: two stages resume in one process and one
// process in two stages, each continuing as the run that never stopped.
TEST_F(PipelineParallel, ARunResumesAtAnotherNumberOfStages) {
  CliRun straight = shell(tandem("--set train.steps=20 --run-dir " + dir.file("straight")));
  ASSERT_EQ(straight.code, 0) << straight.output;
  CliRun first = shell(ranks(2, "--set train.steps=10 --run-dir " + dir.file("split")));
  ASSERT_EQ(first.code, 0) << first.output;
  CliRun resumed = shell(tandem("--set train.steps=20 --resume " + dir.file("split")));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(largest_difference(dir.file("straight"), dir.file("split")), 0.0);
  CliRun alone = shell(tandem("--set train.steps=10 --run-dir " + dir.file("alone")));
  ASSERT_EQ(alone.code, 0) << alone.output;
  CliRun split = shell(ranks(2, "--set train.steps=20 --resume " + dir.file("alone")));
  ASSERT_EQ(split.code, 0) << split.output;
  EXPECT_EQ(largest_difference(dir.file("straight"), dir.file("alone")), 0.0);
}

// By default each stage writes the tensors it holds, and no other, into its
// own file of a sharded checkpoint; together they are the one file that
// --checkpoint-format whole writes, and the run resumes from them on as many
// stages as the run that never stopped.
TEST_F(PipelineParallel, EachStageWritesItsOwnTensorsAndTheRunResumesFromThem) {
  CliRun straight = shell(ranks(2, "--set train.steps=20 --run-dir " + dir.file("straight")));
  ASSERT_EQ(straight.code, 0) << straight.output;
  CliRun first = shell(ranks(2, "--set train.steps=10 --run-dir " + dir.file("stages")));
  ASSERT_EQ(first.code, 0) << first.output;
  CliRun whole =
      shell(ranks(2, "--set train.steps=10 --checkpoint-format whole --run-dir " + dir.file("whole")));
  ASSERT_EQ(whole.code, 0) << whole.output;
  const std::string sharded = dir.file("stages") + "/checkpoints/step-000000010.sharded";
  auto one = host::train::read_checkpoint(dir.file("whole") + "/checkpoints/step-000000010.safetensors");
  ASSERT_TRUE(one.ok()) << one.error().message;
  // --checkpoint-format whole: stage 1's first rank sent its tensors to
  // rank 0, which wrote them with stage 0's; the same bytes as the stages' files.
  size_t held = 0;
  for (const char* file : {"/rank-00000.safetensors", "/rank-00001.safetensors"}) {
    auto stage = host::checkpoint::read_safetensors(sharded + file);
    ASSERT_TRUE(stage.ok()) << file;
    EXPECT_GT(stage->tensors.size(), 2u) << file;
    held += stage->tensors.size();
    for (const auto& t : stage->tensors) {
      const auto* w = one->find(t.name);
      ASSERT_NE(w, nullptr) << t.name;
      EXPECT_EQ(w->shape, t.shape) << t.name;
      EXPECT_TRUE(w->data == t.data) << t.name;
    }
  }
  EXPECT_EQ(held, one->tensors.size()) << "each tensor in one stage's file";
  EXPECT_EQ(largest_difference(dir.file("whole"), dir.file("stages")), 0.0);
  CliRun resumed = shell(ranks(2, "--set train.steps=20 --resume " + dir.file("stages")));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("step-000000010.sharded at step 10 of 20"), std::string::npos)
      << resumed.output;
  EXPECT_EQ(largest_difference(dir.file("straight"), dir.file("stages")), 0.0);
}

// Mixed precision with dynamic loss scaling (the overflow check agreed by
// every stage) and activation checkpointing compose with the stages.
TEST_F(PipelineParallel, AmpAndActivationCheckpointingCompose) {
  const std::string features =
      "--set train.steps=10 --feature amp:dtype=bf16,loss_scale=dynamic --feature checkpointing:segments=2 ";
  CliRun one = shell(tandem(features + "--run-dir " + dir.file("one")));
  if (one.code != 0 && one.output.find("no bf16 kernels") != std::string::npos)
    GTEST_SKIP() << "onednn:0 has no bf16 kernels on this CPU: " << one.output;
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun two = shell(ranks(2, features + "--run-dir " + dir.file("two")));
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_LE(largest_loss_difference(step_losses(dir.file("one")), step_losses(dir.file("two"))), 1e-6);
  EXPECT_EQ(largest_difference(dir.file("one"), dir.file("two")), 0.0);
}

// An evaluation (at the epoch's end, on the test set) passes its
// activations through the stages as training does: the same loss and
// accuracy as one process.
TEST_F(PipelineParallel, EvaluationRunsThroughTheStages) {
  std::ofstream(dir.file("mlp.toml")) << R"([model]
name = "mlp"
input = [8]
classes = 4
[[layers]]
name = "fc1"
op = "linear"
out_features = 16
activation = "relu"
[[layers]]
name = "fc2"
op = "linear"
out_features = 12
activation = "tanh"
[[layers]]
name = "fc3"
op = "linear"
out_features = 4
[train]
lr = 0.05
momentum = 0.9
batch_size = 32
steps = 10
seed = 5
pipeline_parallel = 2
pipeline_microbatches = 4
[data]
format = "synthetic"
synthetic_samples = 512
synthetic_test_samples = 64
)";
  const std::string run = "env -u TANDEM_PLUGIN_PATH TANDEM_CACHE_DIR='" + dir.file("costs") +
                          "' '" TANDEM_EXE "' train " + dir.file("mlp.toml") +
                          " --device reference --run-dir ";
  CliRun one = shell(run + dir.file("one"));
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun two =
      shell("env -u TANDEM_PLUGIN_PATH '" TANDEM_MPIEXEC "' -np 2 --oversubscribe --allow-run-as-root " +
            run + dir.file("two") + " --memory-report --profile " + dir.file("trace.json"));
  ASSERT_EQ(two.code, 0) << two.output;
  const std::regex eval("eval loss [0-9.]+ acc [0-9.]+%");
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(one.output, a, eval)) << one.output;
  ASSERT_TRUE(std::regex_search(two.output, b, eval)) << two.output;
  EXPECT_EQ(a.str(), b.str());
  EXPECT_NE(two.output.find("test accuracy"), std::string::npos) << two.output;
  // Each stage's busy and idle time, measured on its rank.
  EXPECT_NE(two.output.find("pipeline: 2 stages (ranks) x 4 micro-batches"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("  stage 1: busy "), std::string::npos) << two.output;
  // The trace has a track per stage, each stage's forwards and backwards gathered from its rank.
  std::ifstream trace(dir.file("trace.json"));
  const std::string events((std::istreambuf_iterator<char>(trace)), std::istreambuf_iterator<char>());
  EXPECT_NE(events.find("pipeline stage 0 (its rank in the pipeline)"), std::string::npos);
  EXPECT_NE(events.find("pipeline stage 1 (its rank in the pipeline)"), std::string::npos);
  EXPECT_GE(count_of(events, "\"backward 3\""), 20u) << "each step's last backward, on both stages";
}

// A stage that fails in the middle of a step (here --check-numerics finds
// the first non-finite value of a diverging run) stops its rank at once,
// saying so, so that mpirun ends the job: the other stages would otherwise
// wait out their timeout for messages that never come (and this test would
// run into ctest's).
TEST_F(PipelineParallel, AStageThatFailsInAStepEndsTheJob) {
  CliRun failed = shell(ranks(
      2, "--check-numerics --set train.lr=1e9 --set train.clip_grad_norm=0 --run-dir " + dir.file("failed")));
  EXPECT_NE(failed.code, 0) << failed.output;
  EXPECT_NE(failed.output.find("is the first node whose output is not finite"), std::string::npos)
      << failed.output;
  EXPECT_NE(failed.output.find(
                "the other stages wait on it: this rank stops now so that the launcher ends the job"),
            std::string::npos)
      << failed.output;
}

TEST_F(PipelineParallel, StagesThatDoNotDivideTheRanksAreRefusedByName) {
  CliRun three = shell(ranks(2, "--set train.pipeline_parallel=3 --run-dir " + dir.file("three")));
  EXPECT_NE(three.code, 0);
  EXPECT_NE(three.output.find("[train] pipeline_parallel = 3 does not divide the 2 ranks"), std::string::npos)
      << three.output;
  CliRun many = shell(ranks(2, "--set train.pipeline_parallel=16 --run-dir " + dir.file("many")));
  EXPECT_NE(many.code, 0);
}

// `tandem plan --ranks 2` shows the pipeline without launching it: the
// grid, each stage's layers and memory with its micro-batches in flight,
// and the bubble.
TEST(PipelineParallelPlan, ThePlanShowsTheGridTheStagesAndTheBubble) {
  TempDir dir;
  {
    std::ofstream text(dir.file("text.txt"));
    for (int i = 0; i < 80; ++i) text << "many hands make light work. ";
  }
  std::string model = kModel;
  model.replace(model.find("@TEXT"), 5, dir.file("text.txt"));
  model.replace(model.find("@FC"), 3, "");
  model.replace(model.find("@PROJ"), 5, "");
  model.replace(model.find("@DROPOUT"), 8, "0.1");
  std::ofstream(dir.file("gpt.toml")) << model;
  CliRun plan = shell("env -u TANDEM_PLUGIN_PATH TANDEM_CACHE_DIR='" + dir.file("costs") +
                      "' '" TANDEM_EXE "' plan " + dir.file("gpt.toml") + " --device onednn --ranks 4");
  ASSERT_EQ(plan.code, 0) << plan.output;
  EXPECT_NE(plan.output.find("a grid of data 2 x tensor 1 x pipeline 2 = 4 ranks"), std::string::npos)
      << plan.output;
  EXPECT_NE(plan.output.find("pipeline: 2 stages x 4 micro-batches, one forward one backward; bubble "
                             "(S-1)/(M+S-1) = 20.0 %"),
            std::string::npos)
      << plan.output;
  EXPECT_NE(plan.output.find("stage 0 onednn:0/stage0: layers tokens"), std::string::npos) << plan.output;
  EXPECT_NE(plan.output.find("2 micro-batches in flight"), std::string::npos) << plan.output;
  EXPECT_NE(plan.output.find("stage 1 onednn:0/stage1: layers "), std::string::npos) << plan.output;
  EXPECT_NE(plan.output.find(".. head, 1 micro-batch in flight"), std::string::npos) << plan.output;
  // A budget no stage fits is refused with what to change for the stages.
  CliRun tight =
      shell("env -u TANDEM_PLUGIN_PATH TANDEM_CACHE_DIR='" + dir.file("costs") + "' '" TANDEM_EXE "' plan " +
            dir.file("gpt.toml") + " --device onednn --ranks 2 --memory-budget onednn:0=64KiB");
  EXPECT_NE(tight.code, 0) << tight.output;
  EXPECT_NE(tight.output.find("does not fit on onednn:0 with 2 pipeline stages: stage 0 needs"),
            std::string::npos)
      << tight.output;
  EXPECT_NE(tight.output.find("more stages ([train] pipeline_parallel"), std::string::npos) << tight.output;
}

}  // namespace
}  // namespace tandem::test
