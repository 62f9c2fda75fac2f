// Helpers for tests that run `tandem train` under mpiexec and compare runs.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "shell.hpp"
#include "train/checkpointing.hpp"

namespace tandem::test {

inline size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Tests that run `tandem` under mpiexec with the mpi plugin: SKIPPED, saying
// what is missing, without them (the test program defines TANDEM_MPIEXEC
// and TANDEM_HAVE_MPI_PLUGIN).
class MpiRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(TANDEM_MPIEXEC).empty()) GTEST_SKIP() << "mpiexec not found (install openmpi-bin)";
    if (!TANDEM_HAVE_MPI_PLUGIN)
      GTEST_SKIP() << "the mpi plugin is not part of this build (libopenmpi-dev missing)";
  }
};

// Largest difference between the parameters of the newest checkpoints of two runs.
inline double largest_difference(const std::string& run_a, const std::string& run_b) {
  auto a = host::train::read_checkpoint(*host::train::latest_checkpoint(run_a));  // a file, or ZeRO's shards
  auto b = host::train::read_checkpoint(*host::train::latest_checkpoint(run_b));
  EXPECT_TRUE(a.ok() && b.ok());
  if (!a.ok() || !b.ok()) return 1e9;
  double worst = 0;
  size_t compared = 0;
  for (const auto& t : a->tensors) {
    if (t.dtype != TDM_F32 || t.name.rfind("optim.", 0) == 0 || t.name.rfind("grad_accum.", 0) == 0 ||
        t.name.rfind("amp.", 0) == 0)
      continue;
    const auto* u = b->find(t.name);
    EXPECT_NE(u, nullptr) << t.name;
    if (u == nullptr) return 1e9;
    for (size_t i = 0; i < t.data.size() / 4; ++i) {
      float x, y;
      std::memcpy(&x, t.data.data() + 4 * i, 4);
      std::memcpy(&y, u->data.data() + 4 * i, 4);
      worst = std::max(worst, static_cast<double>(std::abs(x - y)));
      ++compared;
    }
  }
  EXPECT_GT(compared, 100u);
  return worst;
}

// The last checkpoints of two runs hold the same tensors, optimizer state
// included, bit for bit; returns how many.
inline size_t expect_same_tensors(const std::string& run_a, const std::string& run_b) {
  auto a = host::train::read_checkpoint(*host::train::latest_checkpoint(run_a));
  auto b = host::train::read_checkpoint(*host::train::latest_checkpoint(run_b));
  EXPECT_TRUE(a.ok() && b.ok());
  if (!a.ok() || !b.ok()) return 0;
  EXPECT_EQ(a->tensors.size(), b->tensors.size());
  size_t same = 0;
  for (const auto& t : a->tensors) {
    const auto* u = b->find(t.name);
    EXPECT_NE(u, nullptr) << t.name;
    if (u == nullptr) continue;
    EXPECT_EQ(u->shape, t.shape) << t.name;
    EXPECT_TRUE(u->data == t.data) << t.name << " differs";
    same += u->shape == t.shape && u->data == t.data;
  }
  return same;
}

// A run of several ranks with the ema feature: its ema.safetensors holds
// each of `weights` whole (the checkpoint's shape), byte-equal to the
// average ("ema.<weight>") the run's last checkpoint holds, and one process
// evaluates `model` with it.
inline void expect_whole_averages(const std::string& run_dir, const std::vector<std::string>& weights,
                                  const std::string& model) {
  auto file = host::checkpoint::read_safetensors(run_dir + "/ema.safetensors");
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto cp =
      host::train::read_checkpoint(*host::train::latest_checkpoint(run_dir));  // a file, or ZeRO's shards
  ASSERT_TRUE(cp.ok()) << cp.error().message;
  for (const std::string& name : weights) {
    const auto* saved = file->find(name);
    const auto* kept = cp->find("ema." + name);
    ASSERT_NE(saved, nullptr) << name;
    ASSERT_NE(kept, nullptr) << name;
    EXPECT_EQ(saved->shape, cp->find(name)->shape) << name << " is whole";
    EXPECT_EQ(saved->data, kept->data) << name;
  }
  CliRun eval = shell(std::string("env -u TANDEM_PLUGIN_PATH '") + TANDEM_EXE + "' eval " + model +
                      " --device reference --weights " + run_dir + "/ema.safetensors");
  EXPECT_EQ(eval.code, 0) << eval.output;
}

// Runs `one` (one process) and `two` (2 ranks) trained 20 steps with amp's
// loss scale held where some steps overflow on one rank only: every rank
// skipped those steps, the ones the single process skipped, and the weights
// ended within `tolerance` of each other.
inline void expect_amp_skipped_like_one_process(const CliRun& one, const std::string& one_dir,
                                                const CliRun& two, const std::string& two_dir,
                                                double tolerance) {
  ASSERT_EQ(one.code, 0) << one.output;
  ASSERT_EQ(two.code, 0) << two.output;
  const size_t skipped = count_of(one.output, "gradients overflowed");
  const size_t on_another_rank = count_of(two.output, "on another rank; step skipped");
  std::cout << "steps skipped of 20: " << skipped << " in one process; under 2 ranks " << on_another_rank
            << " of them overflowed on one rank only\n";
  EXPECT_GT(on_another_rank, 0u) << "no step overflowed on one rank only: re-pick the scale\n" << two.output;
  EXPECT_GT(skipped, 0u);
  EXPECT_LT(skipped, 20u) << "some steps must apply, or the weights would match trivially";
  EXPECT_EQ(count_of(two.output, "gradients overflowed"), 2 * skipped) << two.output;
  const double worst = largest_difference(one_dir, two_dir);
  std::cout << "largest weight difference against one process: " << worst << "\n";
  EXPECT_LE(worst, tolerance);
}

// `launch` (an mpiexec line of 2 ranks up to `--feature testfeature:...`,
// with the test feature plugin on the plugin path) trains with the test
// feature skipping every third step, under `run_dir_base`-suffixed run
// directories:
// - on every rank: it trains on;
// - on rank 1 only, deciding alone: both ranks stop at step 1, saying why,
//   each line tagged with its rank, rather than letting the weights part;
// - on rank 1 only, deciding with the other rank through run_ranks_max (as
//   amp decides): it trains on, to the weights of the first run.
inline void expect_one_ranks_skip_stops_unless_agreed(const std::string& launch,
                                                      const std::string& run_dir_base) {
  CliRun everywhere = shell(launch + "skip_every=3 --run-dir " + run_dir_base + "everywhere");
  ASSERT_EQ(everywhere.code, 0) << everywhere.output;
  CliRun alone =
      shell(launch + "skip_every=3,skip_if_env=OMPI_COMM_WORLD_RANK=1 --run-dir " + run_dir_base + "alone");
  EXPECT_NE(alone.code, 0) << alone.output;
  for (const char* rank : {"tandem[rank 0 of 2]: error: step 1:", "tandem[rank 1 of 2]: error: step 1:"})
    EXPECT_NE(alone.output.find(rank), std::string::npos) << alone.output;
  EXPECT_NE(alone.output.find("step 1: feature(s) 'testfeature' skipped the optimizer step on some ranks and "
                              "not on others"),
            std::string::npos)
      << alone.output;
  CliRun agreed = shell(launch + "skip_every=3,skip_if_env=OMPI_COMM_WORLD_RANK=1,agree=true --run-dir " +
                        run_dir_base + "agreed");
  ASSERT_EQ(agreed.code, 0) << agreed.output;
  EXPECT_EQ(largest_difference(run_dir_base + "everywhere", run_dir_base + "agreed"), 0.0);
}

}  // namespace tandem::test
