// A run directory over a run's life, as a user sees it: one run at a time,
// what an interrupted writer left cleaned up, checkpoints on a schedule,
// a finished or re-planned run explained on resume, and the numerics
// checks that name the first node gone non-finite.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_support.hpp"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

class RunDirectory : public CliTest {
 protected:
  // A checkpoint's tensors (weights and optimizer state) without its header,
  // whose metadata names the run directory.
  static std::string tensor_bytes(const std::string& safetensors) {
    const std::string all = read_file(safetensors);
    uint64_t header = 0;
    if (all.size() < 8) return "";
    std::memcpy(&header, all.data(), 8);
    return header + 8 <= all.size() ? all.substr(8 + header) : "";
  }
  std::vector<std::string> checkpoints(const std::string& run) const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(run + "/checkpoints")) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
};

// The lock is held as a running `tandem train` holds it: flock on
// <run-dir>/.tandem-lock with the holder written in.
TEST_F(RunDirectory, ASecondRunInTheSameDirectoryIsRefusedNamingTheFirst) {
  const std::string run = dir.file("run");
  fs::create_directories(run);
  const int fd = ::open((run + "/.tandem-lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string holder = "pid " + std::to_string(::getpid()) + "\ncommand tandem train first.toml\n";
  ASSERT_EQ(::write(fd, holder.data(), holder.size()), ssize_t(holder.size()));

  CliRun second = tandem("train " + model(kSynthetic) + " --run-dir " + run);
  EXPECT_NE(second.code, 0);
  EXPECT_HAS(second.output,
             "is in use by process " + std::to_string(::getpid()) + " (tandem train first.toml)");
  EXPECT_HAS(second.output, "choose another --run-dir");
  EXPECT_FALSE(fs::exists(run + "/metrics.jsonl"));
  EXPECT_FALSE(fs::exists(run + "/checkpoints"));

  ::close(fd);  // the first run ends: the directory is free again
  CliRun after = tandem("train " + model(kSynthetic) + " --run-dir " + run + " --set train.epochs=1");
  EXPECT_EQ(after.code, 0) << after.output;
}

TEST_F(RunDirectory, TemporaryFilesOfAKilledWriterAreRemovedAndLiveOnesKept) {
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string run = dir.file("run");
  fs::create_directories(run + "/checkpoints");
  const std::string stale = run + "/checkpoints/.step-000000007.safetensors.tmp-" + std::to_string(dead);
  const std::string live = run + "/checkpoints/.step-000000009.safetensors.tmp-" + std::to_string(::getpid());
  const std::string other = run + "/notes.tmp-" + std::to_string(dead);  // not a writer's temporary
  std::ofstream(stale) << std::string(3000, 'x');
  std::ofstream(live) << "y";
  std::ofstream(other) << "z";

  CliRun r = tandem("train " + model(kSynthetic) + " --run-dir " + run + " --set train.epochs=1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "removed 2.9 KiB of temporary files that an interrupted run left in " + run);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
}

TEST_F(RunDirectory, AnUnwritablePlaceFailsBeforeTraining) {
  if (::geteuid() == 0) {
    // root writes anywhere: a file where the directory should be stands in
    std::ofstream(dir.file("file")) << "x";
    CliRun r = tandem("train " + model(kSynthetic) + " --run-dir " + dir.file("file"));
    EXPECT_EQ(r.code, 4);
    EXPECT_HAS(r.output, "--run-dir " + dir.file("file") + ": cannot create the run directory");
  } else {
    fs::create_directories(dir.file("ro"));
    fs::permissions(dir.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    CliRun r = tandem("train " + model(kSynthetic) + " --run-dir " + dir.file("ro"));
    EXPECT_EQ(r.code, 4);
    EXPECT_HAS(r.output, "cannot write in the run directory");
  }
  CliRun profile = tandem("train " + model(kSynthetic) + " --run-dir " + dir.file("run") + " --profile " +
                          dir.file("missing/trace.json"));
  EXPECT_EQ(profile.code, 4);
  EXPECT_HAS(profile.output, "--profile " + dir.file("missing/trace.json") + ": the directory");
  EXPECT_EQ(profile.output.find("epoch 1"), std::string::npos) << "trained before refusing:\n"
                                                               << profile.output;
}

TEST_F(RunDirectory, CheckpointsOnAScheduleKeepTheNewest) {
  const std::string run = dir.file("run");
  // 2 epochs of 32 steps: saves at 10, 20, 30, 32 (epoch end), 42, 52, 62, 64.
  CliRun r = tandem("train " + model(kSynthetic) + " --run-dir " + run +
                    " --checkpoint-every '10 steps' --keep-checkpoints 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "checkpoints every 10 steps (last 2 kept)");
  const std::vector<std::string> expected = {"step-000000062.safetensors", "step-000000064.safetensors"};
  EXPECT_EQ(checkpoints(run), expected);

  // A mid-epoch checkpoint resumes to the same weights as the whole run.
  const std::string straight = dir.file("straight");
  ASSERT_EQ(tandem("train " + model(kSynthetic) + " --run-dir " + straight).code, 0);
  const std::string part = dir.file("part");
  ASSERT_EQ(tandem("train " + model(kSynthetic) + " --run-dir " + part + " --checkpoint-every 10").code, 0);
  fs::remove(part + "/checkpoints/step-000000064.safetensors");
  fs::remove(part + "/checkpoints/step-000000062.safetensors");
  // Left: 52 (mid-epoch 2) as the newest; resuming continues from it.
  CliRun resumed = tandem("train " + model(kSynthetic) + " --resume " + part);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_HAS(resumed.output, "step-000000052.safetensors");
  EXPECT_EQ(tensor_bytes(part + "/checkpoints/step-000000064.safetensors"),
            tensor_bytes(straight + "/checkpoints/step-000000064.safetensors"));
}

TEST_F(RunDirectory, ACheckpointIntervalThatIsNotOneIsRefusedWithExamples) {
  for (const std::string bad : {"0", "-5", "10 parsecs", "15min, 20min", "", "1.5"}) {
    CliRun r = tandem("train " + model(kSynthetic) + " --run-dir " + dir.file("run") +
                      " --checkpoint-every '" + bad + "'");
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_HAS(r.output, "--checkpoint-every: ");
    EXPECT_HAS(r.output, "is not a checkpoint interval");
  }
  std::string text = kSynthetic;
  text.replace(text.find("seed = 3"), 8, "seed = 3\ncheckpoint_every = \"soon\"");
  CliRun r = tandem("train " + model(text) + " --run-dir " + dir.file("run"));
  EXPECT_EQ(r.code, 4);
  EXPECT_HAS(r.output, "m.toml:20:");
  EXPECT_HAS(r.output, "'soon' is not a checkpoint interval");
  CliRun keep =
      tandem("train " + model(kSynthetic) + " --run-dir " + dir.file("run") + " --keep-checkpoints 0");
  EXPECT_EQ(keep.code, 2);
  EXPECT_HAS(keep.output, "keep at least 1");
}

TEST_F(RunDirectory, ResumingAFinishedRunSaysSoAndALongerRunWarnsAboutTheSchedule) {
  std::string text = kSynthetic;
  text.replace(text.find("momentum"), 8, "schedule = \"cosine\"\nmomentum");
  const std::string run = dir.file("run");
  ASSERT_EQ(tandem("train " + model(text) + " --run-dir " + run).code, 0);

  CliRun finished = tandem("train " + model(text) + " --resume " + run);
  EXPECT_EQ(finished.code, 0) << finished.output;
  EXPECT_HAS(finished.output, "is at step 64 of 64: the run is finished, nothing to train");
  EXPECT_EQ(checkpoints(run).back(), "step-000000064.safetensors");

  CliRun longer = tandem("train " + model(text) + " --resume " + run + " --set train.epochs=3");
  ASSERT_EQ(longer.code, 0) << longer.output;
  EXPECT_HAS(longer.output, "resuming a run planned for 64 steps as one of 96 steps");
  EXPECT_HAS(longer.output, "the cosine learning-rate schedule is now spread over 96 steps");
  EXPECT_EQ(checkpoints(run).back(), "step-000000096.safetensors");
}

// lr = 1e30 makes fc2's weights ~1e30 at the first update: its products
// overflow in the second forward pass, the first non-finite value.
TEST_F(RunDirectory, CheckNumericsNamesTheFirstNodeWhoseOutputIsNotFinite) {
  std::string text = kSynthetic;
  text.replace(text.find("lr = 0.05"), 9, "lr = 1e30");
  CliRun plain = tandem("train " + model(text) + " --run-dir " + dir.file("plain"));
  EXPECT_EQ(plain.code, 1);
  EXPECT_HAS(plain.output, "training diverged");
  EXPECT_HAS(plain.output, "--check-numerics names the first node");

  CliRun checked = tandem("train " + model(text) + " --run-dir " + dir.file("checked") +
                          " --device reference --check-numerics");
  EXPECT_EQ(checked.code, 1);
  EXPECT_HAS(checked.output, "--check-numerics: node '");
  EXPECT_HAS(checked.output, "is the first node whose output is not finite");
  EXPECT_HAS(checked.output, "on reference:0");
  EXPECT_HAS(checked.output, "(layer 'fc2', linear)");
  EXPECT_EQ(checked.output.find("training diverged"), std::string::npos) << checked.output;

  // Every kernel writes all of its outputs and nothing past them: poisoning
  // them and guarding what follows them changes nothing.
  CliRun poisoned = tandem("train " + model(kSynthetic) + " --run-dir " + dir.file("poisoned") +
                           " --check-numerics --poison-outputs --check-bounds --set train.epochs=1");
  CliRun clean =
      tandem("train " + model(kSynthetic) + " --run-dir " + dir.file("clean") + " --set train.epochs=1");
  ASSERT_EQ(poisoned.code, 0) << poisoned.output;
  ASSERT_EQ(clean.code, 0) << clean.output;
  EXPECT_EQ(tensor_bytes(dir.file("poisoned/checkpoints/step-000000032.safetensors")),
            tensor_bytes(dir.file("clean/checkpoints/step-000000032.safetensors")));
  CliRun guarded = tandem("train " + model(kSynthetic) + " --run-dir " + dir.file("guarded") +
                          " --device reference --check-bounds --set train.epochs=1");
  EXPECT_EQ(guarded.code, 0) << guarded.output;
}

}  // namespace
}  // namespace tandem::test
