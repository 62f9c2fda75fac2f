// The SDK's example feature plugin, ema (sdk/examples/ema_feature), through
// the `tandem` program as a user runs it: the average it keeps on the device
// follows ema ← ema + (1 − decay)·(weight − ema) from the weights --init-from
// loaded, checkpoints carry it, and the ema.safetensors it writes at the end
// (host->run_save_tensors) is what `tandem eval --weights` reads directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "shell.hpp"
#include "temp_dir.hpp"
#include "train/checkpointing.hpp"

namespace tandem::test {
namespace {

namespace ckpt = host::checkpoint;

const char* kModel = R"([model]
input = [8]
classes = 3
[[layers]]
name = "fc1"
op = "linear"
out_features = 16
activation = "relu"
[[layers]]
name = "fc2"
op = "linear"
out_features = 3
[train]
lr = 0.1
momentum = 0.9
batch_size = 16
seed = 5
[data]
format = "synthetic"
synthetic_samples = 256
synthetic_test_samples = 64
)";

class Ema : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(TANDEM_TEST_FEATURE_DIR) + "/libtandem-ema.so"))
      GTEST_SKIP() << "the ema example plugin is not part of this build";
    std::ofstream(dir_.file("model.toml")) << kModel;
  }
  // `tandem ARGS` with this build's plugins and the test's feature plugins.
  CliRun tandem(const std::string& args) const {
    return shell("env -u TANDEM_PLUGIN_PATH '" TANDEM_EXE "' " + args +
                 " --plugin-path '" TANDEM_TEST_FEATURE_DIR "' --device reference:0");
  }
  std::string model() const { return "'" + dir_.file("model.toml") + "'"; }
  static std::vector<float> floats(const ckpt::Checkpoint& cp, const std::string& name) {
    const ckpt::TensorRecord* t = cp.find(name);
    EXPECT_NE(t, nullptr) << name;
    if (t == nullptr) return {};
    std::vector<float> v(t->data.size() / sizeof(float));
    std::memcpy(v.data(), t->data.data(), t->data.size());
    return v;
  }
  static ckpt::Checkpoint read(const std::string& path) {
    auto cp = ckpt::read_safetensors(path);
    EXPECT_TRUE(cp.ok()) << cp.error().message;
    return cp.ok() ? std::move(*cp) : ckpt::Checkpoint{};
  }
  TempDir dir_;
};

TEST_F(Ema, AveragesFromTheLoadedWeightsAndEvalReadsItsFile) {
  const std::string start = dir_.file("start"), run = dir_.file("ema");
  CliRun first = tandem("train " + model() + " --run-dir '" + start + "' --set train.steps=2");
  ASSERT_EQ(first.code, 0) << first.output;
  const double decay = 0.6;
  CliRun trained =
      tandem("train " + model() + " --run-dir '" + run + "' --init-from '" + start +
             "' --set train.steps=3 --set train.checkpoint_every=1 --set train.keep_checkpoints=10"
             " --feature ema:decay=" +
             std::to_string(decay));
  ASSERT_EQ(trained.code, 0) << trained.output;

  // Step by step, from the weights --init-from loaded (state_add_copy).
  const ckpt::Checkpoint loaded = read(host::train::checkpoint_file(start, 2));
  for (const char* weight : {"fc1.weight", "fc1.bias", "fc2.weight"}) {
    std::vector<float> ema = floats(loaded, weight);
    for (int step = 1; step <= 3; ++step) {
      const ckpt::Checkpoint cp = read(host::train::checkpoint_file(run, step));
      const std::vector<float> w = floats(cp, weight), kept = floats(cp, std::string("ema.") + weight);
      ASSERT_EQ(w.size(), ema.size());
      ASSERT_EQ(kept.size(), ema.size());
      double worst = 0;
      for (size_t i = 0; i < ema.size(); ++i) {
        ema[i] = ema[i] + static_cast<float>(1.0 - decay) * (w[i] - ema[i]);
        worst = std::max(worst, static_cast<double>(std::abs(ema[i] - kept[i])));
      }
      EXPECT_LE(worst, 1e-6) << weight << " after step " << step;
      ema = kept;
    }
    // The file holds the last average under the weight's own name.
    const ckpt::Checkpoint file = read(run + "/ema.safetensors");
    EXPECT_EQ(floats(file, weight), ema) << weight;
    EXPECT_EQ(file.find(std::string("ema.") + weight), nullptr);
    EXPECT_NE(floats(file, weight), floats(read(host::train::checkpoint_file(run, 3)), weight))
        << "an average, not the weights";
  }

  CliRun eval = tandem("eval " + model() + " --weights '" + run + "/ema.safetensors'");
  EXPECT_EQ(eval.code, 0) << eval.output;
  EXPECT_NE(eval.output.find("ema.safetensors"), std::string::npos) << eval.output;
  EXPECT_NE(eval.output.find("accuracy"), std::string::npos) << eval.output;
}

// A resumed run continues the average the checkpoint holds; `every` writes
// the file during the run too.
TEST_F(Ema, ResumeContinuesTheAverageAndEveryWritesDuringTheRun) {
  const std::string whole = dir_.file("whole"), parts = dir_.file("parts");
  const std::string ema =
      " --set train.steps=4 --set train.checkpoint_every=2 --feature ema:decay=0.5 --feature ema:every=1";
  ASSERT_EQ(tandem("train " + model() + " --run-dir '" + whole + "'" + ema).code, 0);
  CliRun half = tandem("--log-level info train " + model() + " --run-dir '" + parts + "'" + ema);
  ASSERT_EQ(half.code, 0) << half.output;
  // every = 1: after each of the 4 steps, and once more at the end.
  size_t writes = 0;
  for (size_t at = half.output.find("/ema.safetensors (5 tensors)"); at != std::string::npos;
       at = half.output.find("/ema.safetensors (5 tensors)", at + 1))
    ++writes;
  EXPECT_EQ(writes, 5u) << half.output;
  std::filesystem::remove(parts + "/ema.safetensors");
  std::filesystem::remove(host::train::checkpoint_file(parts, 4));
  CliRun resumed = tandem("train " + model() + " --run-dir '" + parts + "' --resume '" + parts + "'" + ema);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(floats(read(whole + "/ema.safetensors"), "fc2.weight"),
            floats(read(parts + "/ema.safetensors"), "fc2.weight"));
}

TEST_F(Ema, BadOptionsAndFileNamesAreNamed) {
  CliRun decay = tandem("train " + model() + " --run-dir '" + dir_.file("a") +
                        "' --set train.steps=1 --feature ema:decay=1.5");
  EXPECT_NE(decay.code, 0);
  EXPECT_NE(decay.output.find("decay = 1.5"), std::string::npos) << decay.output;
  CliRun file = tandem("train " + model() + " --run-dir '" + dir_.file("b") +
                       "' --set train.steps=1 --feature ema:file=../outside.safetensors");
  EXPECT_EQ(file.code, 4) << file.output;
  EXPECT_NE(file.output.find("not a file name for the run directory"), std::string::npos) << file.output;
  EXPECT_NE(file.output.find("run_save_tensors"), std::string::npos) << file.output;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("outside.safetensors")));
}

}  // namespace
}  // namespace tandem::test
