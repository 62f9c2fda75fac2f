// Data parallelism end to end: `mpiexec -np 2 tandem train` with batch 64 per
// rank ends with the weights of one process at batch 128 after the same
// number of steps (within 1e-5: the average of two per-rank mean gradients
// sums in another order than one mean over 128 samples), whether gradients
// travel one per message or bucketed, and only rank 0 reports and writes
// checkpoints.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "checkpoint/safetensors.hpp"
#include "parallel_runs.hpp"
#include "temp_dir.hpp"
#include "train/checkpointing.hpp"

namespace tandem::test {
namespace {

const char* kModel = R"([model]
name = "dp"
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
out_features = 4
[train]
lr = 0.05
momentum = 0.9
clip_grad_norm = 1.0
batch_size = 128
steps = 10
seed = 5
[data]
format = "synthetic"
synthetic_samples = 2048
synthetic_test_samples = 64
)";

class DataParallel : public MpiRuns {};

TEST_F(DataParallel, TwoRanksAtHalfTheBatchMatchOneRank) {
  TempDir dir;
  std::ofstream(dir.file("dp.toml")) << kModel;
  const std::string tandem = std::string("'") + TANDEM_EXE + "' --allow-insecure-plugins train " +
                             dir.file("dp.toml") + " --device reference";
  CliRun one = shell("env -u TANDEM_PLUGIN_PATH " + tandem + " --run-dir " + dir.file("one"));
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun two =
      shell("env -u TANDEM_PLUGIN_PATH '" TANDEM_MPIEXEC "' -np 2 --oversubscribe --allow-run-as-root " +
            tandem + " --set train.batch_size=64 --bucket-mb 0 --profile " + dir.file("trace.json") +
            " --run-dir " + dir.file("two"));
  ASSERT_EQ(two.code, 0) << two.output;
  // One message per gradient (4 per step), each started as backward finished it.
  EXPECT_NE(two.output.find("gradient all-reduce (40 messages over 10 steps"), std::string::npos)
      << two.output;
  EXPECT_NE(two.output.find("hidden behind backward"), std::string::npos) << two.output;
  EXPECT_EQ(count_of(two.output, "training dp"), 1u) << "only rank 0 reports:\n" << two.output;
  EXPECT_NE(two.output.find("per rank x 2 ranks"), std::string::npos) << two.output;

  auto b = host::checkpoint::read_safetensors(*host::train::latest_checkpoint(dir.file("two")));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->metadata.at("tandem.world_size"), "2");
  const double worst = largest_difference(dir.file("one"), dir.file("two"));
  std::cout << "largest weight difference, 1 rank x 128 vs 2 ranks x 64, after 10 steps: " << worst << "\n";
  EXPECT_LE(worst, 1e-5);
}

// Streamed parameters under data parallelism: each rank streams its own
// copy of the parameters and the optimizer state; the gradients stay on the
// device, where the ranks all-reduce them. Bit-identical to resident ranks.
TEST_F(DataParallel, EachRankStreamsItsCopyAndTrainsAsResidentRanksDo) {
  TempDir dir;
  std::ofstream(dir.file("dp.toml")) << kModel;
  const std::string two = "env -u TANDEM_PLUGIN_PATH '" TANDEM_MPIEXEC
                          "' -np 2 --oversubscribe --allow-run-as-root '" +
                          std::string(TANDEM_EXE) + "' --allow-insecure-plugins train " +
                          dir.file("dp.toml") + " --device reference --set train.batch_size=64";
  CliRun resident = shell(two + " --run-dir " + dir.file("resident"));
  ASSERT_EQ(resident.code, 0) << resident.output;
  CliRun streamed = shell(two + " --stream-params --memory-report --run-dir " + dir.file("streamed"));
  ASSERT_EQ(streamed.code, 0) << streamed.output;
  EXPECT_NE(streamed.output.find("streamed per training step"), std::string::npos) << streamed.output;
  EXPECT_NE(streamed.output.find("per rank x 2 ranks"), std::string::npos) << streamed.output;
  EXPECT_EQ(largest_difference(dir.file("resident"), dir.file("streamed")), 0.0);
}

TEST_F(DataParallel, WithGradientAccumulationTwoRanksMatchOneRank) {
  TempDir dir;
  std::ofstream(dir.file("dp.toml")) << kModel;
  const std::string tandem = std::string("'") + TANDEM_EXE + "' --allow-insecure-plugins train " +
                             dir.file("dp.toml") + " --device reference";
  // One rank, batch 128 per step; two ranks, 2 micro-batches of 32 each: 128 per step too.
  CliRun one = shell("env -u TANDEM_PLUGIN_PATH " + tandem + " --run-dir " + dir.file("one"));
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun two = shell(
      "env -u TANDEM_PLUGIN_PATH '" TANDEM_MPIEXEC "' -np 2 --oversubscribe --allow-run-as-root " + tandem +
      " --set train.batch_size=32 --set features.grad_accum.steps=2 --run-dir " + dir.file("two"));
  ASSERT_EQ(two.code, 0) << two.output;
  const double worst = largest_difference(dir.file("one"), dir.file("two"));
  std::cout << "largest weight difference, 1 rank x 128 vs 2 ranks x 2 micro-batches x 32: " << worst << "\n";
  EXPECT_LE(worst, 1e-5);
}

// A language model (attention, a tied head) on token windows: two ranks at
// half the batch draw the same windows as one process and end with its
// weights, with ZeRO as without.
TEST_F(DataParallel, ALanguageModelOnTwoRanksMatchesOneRank) {
  TempDir dir;
  {
    std::ofstream text(dir.file("text.txt"));
    for (int i = 0; i < 100; ++i) text << "a stitch in time saves nine. ";
  }
  std::ofstream(dir.file("lm.toml")) << R"([model]
name = "lm"
task = "language_model"
context = 12
vocab_size = 256
[[layers]]
name = "tok"
op = "embedding"
num_embeddings = 256
embedding_dim = 16
init_std = 0.02
[[layers]]
name = "pos"
op = "position_embedding"
[[layers]]
name = "attn"
op = "attention"
heads = 2
[[layers]]
name = "res"
op = "add"
inputs = ["pos", "attn"]
[[layers]]
name = "head"
op = "linear"
out_features = 256
tie_weight = "tok"
[train]
optimizer = "adamw"
lr = 0.01
batch_size = 16
steps = 10
seed = 3
[data]
format = "tokens"
train_tokens = ")" + dir.file("text.txt") + R"("
windows_per_epoch = 160
)";
  const std::string tandem = std::string("'") + TANDEM_EXE + "' --allow-insecure-plugins train " +
                             dir.file("lm.toml") + " --device reference";
  CliRun one = shell("env -u TANDEM_PLUGIN_PATH " + tandem + " --run-dir " + dir.file("one"));
  ASSERT_EQ(one.code, 0) << one.output;
  CliRun two =
      shell("env -u TANDEM_PLUGIN_PATH '" TANDEM_MPIEXEC "' -np 2 --oversubscribe --allow-run-as-root " +
            tandem + " --set train.batch_size=8 --run-dir " + dir.file("two"));
  ASSERT_EQ(two.code, 0) << two.output;
  const double worst = largest_difference(dir.file("one"), dir.file("two"));
  std::cout << "largest weight difference of a language model, 1 rank x 16 vs 2 ranks x 8, after 10 steps: "
            << worst << "\n";
  EXPECT_LE(worst, 1e-5);
  // ZeRO's stages 2 and 3 too: stage 3 gathers the tied table for the
  // embedding and again for the head, and sums both gradients into its shard.
  for (const char* stage : {"2", "3"}) {
    CliRun zero = shell(
        "env -u TANDEM_PLUGIN_PATH '" TANDEM_MPIEXEC "' -np 2 --oversubscribe --allow-run-as-root " + tandem +
        " --set train.batch_size=8 --zero " + stage + " --run-dir " + dir.file(std::string("zero") + stage));
    ASSERT_EQ(zero.code, 0) << zero.output;
    EXPECT_LE(largest_difference(dir.file("two"), dir.file(std::string("zero") + stage)), 1e-5)
        << "stage " << stage;
  }
}

// A feature decides from its rank's own gradients, before they are averaged
// (as amp's overflow check does), so it may skip a step on one rank only.
TEST_F(DataParallel, AStepSkippedOnOneRankOnlyStopsTheRunUnlessTheRanksAgree) {
  TempDir dir;
  std::ofstream(dir.file("dp.toml")) << kModel;
  expect_one_ranks_skip_stops_unless_agreed(
      std::string("env TANDEM_PLUGIN_PATH='") + TANDEM_TEST_FEATURE_DIR +
          "' '" TANDEM_MPIEXEC "' -np 2 --oversubscribe --allow-run-as-root '" + TANDEM_EXE +
          "' --allow-insecure-plugins train " + dir.file("dp.toml") +
          " --device reference --set train.batch_size=64 --feature "
          "testfeature:",
      dir.file("skips_"));
}

// amp in f16 with its scale held at 6e4 (min_scale), one sample a rank: a
// rank's overflow check sees its own gradients before they are averaged,
// and at this scale one rank overflows and the other does not on 7 of the
// 20 steps (measured: one rank only at 5.6e4 and 6.4e4 as well, none at
// 5.2e4, both at once on some steps at 6.8e4; re-pick it in that range if
// the model or its data change). Every rank must skip those steps, as one process does with the
// same scaled values (scale 1.2e5 over a batch of 2 gives each sample's loss
// gradient the same scaled value as 6e4 over 1).
TEST_F(DataParallel, AmpSkipsTheStepsOneRankOverflowsOnEveryRankLikeOneProcess) {
  TempDir dir;
  std::ofstream(dir.file("dp.toml")) << kModel;
  const std::string tandem = std::string("'") + TANDEM_EXE + "' --allow-insecure-plugins train " +
                             dir.file("dp.toml") +
                             " --device reference --set train.steps=20 --feature amp:dtype=f16,";
  CliRun one =
      shell("env -u TANDEM_PLUGIN_PATH " + tandem +
            "initial_scale=1.2e5,min_scale=1.2e5 --set train.batch_size=2 --run-dir " + dir.file("one"));
  CliRun two =
      shell("env -u TANDEM_PLUGIN_PATH '" TANDEM_MPIEXEC "' -np 2 --oversubscribe --allow-run-as-root " +
            tandem + "initial_scale=6e4,min_scale=6e4 --set train.batch_size=1 --run-dir " + dir.file("two"));
  expect_amp_skipped_like_one_process(one, dir.file("one"), two, dir.file("two"), 1e-5);
}

TEST_F(DataParallel, ARunResumesWithAnotherNumberOfRanks) {
  TempDir dir;
  std::ofstream(dir.file("dp.toml")) << kModel;
  const std::string tandem = std::string("'") + TANDEM_EXE + "' --allow-insecure-plugins train " +
                             dir.file("dp.toml") +
                             " --device reference --set train.steps=0 --set train.batch_size=16 --set "
                             "data.synthetic_samples=512 --run-dir " +
                             dir.file("run");
  // Two ranks train epoch 1 (512 samples / (16 x 2) = 16 steps) ...
  CliRun two =
      shell("env -u TANDEM_PLUGIN_PATH '" TANDEM_MPIEXEC "' -np 2 --oversubscribe --allow-run-as-root " +
            tandem + " --set train.epochs=1");
  ASSERT_EQ(two.code, 0) << two.output;
  // ... one process continues with epoch 2 (512 / 16 = 32 steps of its own
  // size, counted as if epoch 1 had been 32 of them too).
  CliRun one =
      shell("env -u TANDEM_PLUGIN_PATH " + tandem + " --set train.epochs=2 --resume " + dir.file("run"));
  ASSERT_EQ(one.code, 0) << one.output;
  EXPECT_NE(one.output.find("epoch 2/2 done"), std::string::npos) << one.output;
  EXPECT_EQ(one.output.find("epoch 3/"), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("trained 64 steps"), std::string::npos) << one.output;
}

TEST_F(DataParallel, ADeadRankStopsTheOthersWithAClearErrorAndIntactCheckpoints) {
  TempDir dir;
  std::ofstream(dir.file("dp.toml")) << kModel;
  // Rank 1 is killed (SIGKILL) one second in; --enable-recovery keeps Open MPI
  // from tearing rank 0 down at once, which is the case the timeout is for (a
  // hung or vanished peer). `exec` keeps the shell's PID, so $$ is tandem's.
  const std::string command = "env -u TANDEM_PLUGIN_PATH timeout 120 '" TANDEM_MPIEXEC
                              "' -np 2 --oversubscribe --allow-run-as-root "
                              "--enable-recovery sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then (sleep 1; "
                              "kill -9 $$) & fi; exec \"$0\" \"$@\"' '" +
                              std::string(TANDEM_EXE) + "' --allow-insecure-plugins train " +
                              dir.file("dp.toml") +
                              " --device reference --set train.steps=1000000 --set train.log_every=1000000 "
                              "--comm-timeout 3 --run-dir " +
                              dir.file("run");
  const auto start = std::chrono::steady_clock::now();
  CliRun run = shell(command);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "rank 0 stopped " << seconds << " s after the start (rank 1 killed at 1 s, timeout 3 s)\n";
  EXPECT_LT(seconds, 60.0) << run.output;
  // The wait it reports is measured (3.0 s, or 3.1 s on a busy machine); the limit is the one given.
  EXPECT_NE(run.output.find("timed out after 3."), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("(timeout_seconds 3)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("did not arrive"), std::string::npos) << run.output;
  // Whatever checkpoints exist are whole.
  if (auto last = host::train::latest_checkpoint(dir.file("run"))) {
    auto cp = host::checkpoint::read_safetensors(*last);
    EXPECT_TRUE(cp.ok()) << cp.error().message;
  }
}

// A rank that fails alone (rank 0 cannot create its --tensorboard
// directory; the other rank goes on into its first collective) ends the
// job at once with its error, not after --comm-timeout (300 s here: the
// `timeout 100` would end the hang with status 124).
TEST_F(DataParallel, ARankThatFailsAloneEndsTheJobAtOnce) {
  TempDir dir;
  std::ofstream(dir.file("dp.toml")) << kModel;
  CliRun run =
      shell("env -u TANDEM_PLUGIN_PATH timeout 100 '" TANDEM_MPIEXEC
            "' -np 2 --oversubscribe --allow-run-as-root '" +
            std::string(TANDEM_EXE) + "' --allow-insecure-plugins train " + dir.file("dp.toml") +
            " --device reference --tensorboard /proc/no-such-directory --run-dir " + dir.file("run"));
  EXPECT_NE(run.code, 0) << run.output;
  EXPECT_NE(run.code, 124) << "the job waited for the failed rank:\n" << run.output;
  EXPECT_NE(run.output.find("tandem[rank 0 of 2]: error: --tensorboard /proc/no-such-directory"),
            std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace tandem::test
