// Signals during `tandem train` on onednn, as users and schedulers send them
// (host/cli/signals.hpp): Ctrl-C at any moment of training saves a
// checkpoint and exits 130, every time; signals that only ask for a progress
// line change nothing, to the bit. With all of this build's plugins loaded
// (the CUDA libraries beside oneDNN were what turned a handled signal into
// heap corruption on AVX2 CPUs). Run natively and, through the isa_avx2
// variants, with oneDNN limited to AVX2.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.hpp"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Long enough that a signal sent while it trains lands in training: 60
// epochs of 32 steps of a 64-256-10 MLP on synthetic data (a few seconds).
const char* kModel = R"([model]
name = "signals"
input = [64]
classes = 10
[[layers]]
name = "fc1"
op = "linear"
out_features = 256
activation = "relu"
[[layers]]
name = "fc2"
op = "linear"
out_features = 10
[train]
lr = 0.05
momentum = 0.9
batch_size = 32
epochs = 60
seed = 5
log_every = 1
[data]
format = "synthetic"
synthetic_samples = 1024
synthetic_test_samples = 64
)";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Signals : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("m.toml")) << kModel;
    model_ = dir_.file("m.toml");
  }

  // Starts `tandem train` on onednn:0 for `epochs` into run directory
  // `run`, its output (stdout and stderr) into `run`.log.
  pid_t start(const std::string& run, int epochs = 60) {
    const std::string log = dir_.file(run + ".log"), run_dir = dir_.file(run);
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::freopen(log.c_str(), "w", stdout);
      ::dup2(STDOUT_FILENO, STDERR_FILENO);
      ::unsetenv("TANDEM_PLUGIN_PATH");
      const std::string set = "train.epochs=" + std::to_string(epochs);
      ::execl(TANDEM_EXE, TANDEM_EXE, "--allow-insecure-plugins", "train", model_.c_str(), "--device",
              "onednn:0", "--threads", "2", "--run-dir", run_dir.c_str(), "--set", set.c_str(),
              static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    return pid;
  }

  // Waits until the run's log shows its first training step (or it ended).
  bool wait_for_training(pid_t pid, const std::string& run) {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      if (read_file(dir_.file(run + ".log")).find(" step ") != std::string::npos) return true;
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  // The tensors of a checkpoint, without the header's metadata (paths differ).
  static std::string tensors(const std::string& path) {
    const std::string bytes = read_file(path);
    if (bytes.size() < 8) return {};
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    return bytes.substr(8 + n);
  }
  std::string newest_checkpoint(const std::string& run) {
    std::string last;
    const fs::path dir = dir_.file(run + "/checkpoints");
    if (!fs::exists(dir)) return last;
    for (const auto& e : fs::directory_iterator(dir)) last = std::max(last, e.path().string());
    return last;
  }

  TempDir dir_;
  std::string model_;
};

// Epochs of a run that a signal is meant to interrupt.
constexpr int kInterruptedEpochs = 2000;

bool onednn_missing() {
  return !fs::exists(std::string(TANDEM_BUILD_PLUGIN_DIR) + "/libtandem-onednn.so");
}

TEST_F(Signals, CtrlCAtAnyMomentOfTrainingSavesACheckpointAndExits130) {
  if (onednn_missing()) GTEST_SKIP() << "the onednn plugin is not part of this build";
  constexpr int kTries = 100;
  std::mt19937 rng(20261123);
  std::uniform_int_distribution<int> delay_us(0, 400000);  // within the first 0.4 s of training
  int saved = 0;
  for (int t = 0; t < kTries; ++t) {
    const std::string run = "ctrl-c-" + std::to_string(t);
    // Long enough that no CPU finishes it before the signal (a fast AVX-512
    // machine did 60 epochs within the 0.4 s window); the signal ends it.
    const pid_t pid = start(run, kInterruptedEpochs);
    ASSERT_TRUE(wait_for_training(pid, run)) << read_file(dir_.file(run + ".log"));
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    ::kill(pid, SIGINT);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    const std::string log = read_file(dir_.file(run + ".log"));
    ASSERT_TRUE(WIFEXITED(status)) << "try " << t << ": ended by signal " << WTERMSIG(status) << "\n" << log;
    ASSERT_EQ(WEXITSTATUS(status), 130) << "try " << t << "\n" << log;
    ASSERT_NE(log.find("interrupted: checkpoint saved to "), std::string::npos) << "try " << t << "\n" << log;
    ASSERT_FALSE(tensors(newest_checkpoint(run)).empty()) << "try " << t << "\n" << log;
    ++saved;
    fs::remove_all(dir_.file(run));
  }
  EXPECT_EQ(saved, kTries);
}

// What a scheduler sends before it kills a job (Slurm: SIGTERM), and a
// closed terminal (SIGHUP): the same checkpoint, exit 128 + the signal.
TEST_F(Signals, SigtermAndSighupSaveACheckpointToo) {
  if (onednn_missing()) GTEST_SKIP() << "the onednn plugin is not part of this build";
  for (const int sig : {SIGTERM, SIGHUP}) {
    const std::string run = "signal-" + std::to_string(sig);
    const pid_t pid = start(run, kInterruptedEpochs);
    ASSERT_TRUE(wait_for_training(pid, run)) << read_file(dir_.file(run + ".log"));
    ::kill(pid, sig);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    const std::string log = read_file(dir_.file(run + ".log"));
    ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << "\n" << log;
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << log;
    EXPECT_NE(log.find("interrupted: checkpoint saved to "), std::string::npos) << log;
    EXPECT_FALSE(tensors(newest_checkpoint(run)).empty()) << log;
  }
}

// Every child process of `pid` (through all its threads).
std::vector<std::string> children_of(pid_t pid) {
  std::vector<std::string> out;
  const fs::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& task : fs::directory_iterator(tasks, ec)) {
    std::istringstream in(read_file((task.path() / "children").string()));
    for (std::string child; in >> child;) out.push_back(read_file("/proc/" + child + "/comm"));
  }
  return out;
}

// The mpi plugin is loaded by every command, but MPI starts (progress
// threads, and outside mpirun an `orted` helper process) only when a
// launch asks for several ranks: a single-process run has no child.
TEST_F(Signals, ASingleProcessRunStartsNoMpi) {
  if (onednn_missing()) GTEST_SKIP() << "the onednn plugin is not part of this build";
  if (!fs::exists(std::string(TANDEM_BUILD_PLUGIN_DIR) + "/libtandem-mpi.so"))
    GTEST_SKIP() << "the mpi plugin is not part of this build";
  const pid_t pid = start("single");
  ASSERT_TRUE(wait_for_training(pid, "single")) << read_file(dir_.file("single.log"));
  const std::vector<std::string> children = children_of(pid);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::string names;
  for (const std::string& c : children) names += c;
  EXPECT_TRUE(children.empty()) << "a single-process run started " << names;
}

TEST_F(Signals, RepeatedStatusSignalsLeaveTheRunBitIdentical) {
  if (onednn_missing()) GTEST_SKIP() << "the onednn plugin is not part of this build";
  const pid_t quiet = start("quiet", 40);
  int status = 0;
  ASSERT_EQ(::waitpid(quiet, &status, 0), quiet);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir_.file("quiet.log"));

  const pid_t busy = start("busy", 40);
  ASSERT_TRUE(wait_for_training(busy, "busy")) << read_file(dir_.file("busy.log"));
  int sent = 0;
  while (::waitpid(busy, &status, WNOHANG) == 0) {
    ::kill(busy, SIGUSR1);  // "print your progress line": never a reason to stop or to differ
    ++sent;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const std::string log = read_file(dir_.file("busy.log"));
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << " after " << sent << "\n"
                                 << log;
  ASSERT_EQ(WEXITSTATUS(status), 0) << log;
  EXPECT_GT(sent, 100) << "too few signals to mean anything";
  EXPECT_NE(log.find(" step "), std::string::npos) << "SIGUSR1 prints the progress line";
  std::cout << sent << " SIGUSR1 during the run" << std::endl;
  const std::string a = tensors(newest_checkpoint("quiet")), b = tensors(newest_checkpoint("busy"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "the final weights differ from the undisturbed run's";
}

}  // namespace
}  // namespace tandem::test
