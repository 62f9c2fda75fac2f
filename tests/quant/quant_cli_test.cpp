// INT8 end to end through the `tandem` program, as a user runs it: train the
// Fashion-MNIST MLP briefly on onednn, `tandem quantize` it with each
// calibrator, `tandem eval` the INT8 model on onednn, and compare with the
// f32 accuracy (within half a point). On a CPU without VNNI (every machine
// under ONEDNN_MAX_CPU_ISA=AVX2: the isa_avx2 runs) the weights are 7-bit
// and calibration.json says so. Then the error exits for a broken or
// missing calibration file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "shell.hpp"
#include "temp_dir.hpp"

namespace {

using tandem::test::CliRun;
using tandem::test::shell;

namespace fs = std::filesystem;

CliRun tandem(const std::string& args) {
  std::string flags;
  struct stat st {};
  if (::stat(TANDEM_BUILD_PLUGIN_DIR, &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    flags = " --allow-insecure-plugins";
  return shell("env -u TANDEM_PLUGIN_PATH '" TANDEM_EXE "' " + args + flags);
}

double accuracy_of(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("accuracy ([0-9.]+)"))) return -1;
  return std::stod(m[1]);
}

const std::string kModel = std::string(TANDEM_SOURCE_DIR) + "/examples/fmnist_mlp.toml";
const char* kData = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
const std::string kDevice = " --device onednn:0 --threads 2";

// The FEATURES `tandem devices` shows for onednn:0 (ABI 1.4).
std::string onednn_features() {
  const CliRun r = tandem("devices");
  std::smatch m;
  if (!std::regex_search(r.output, m,
                         std::regex("onednn:0 +onednn +cpu +\\S+ \\S+ +\\S+ \\S+ +(.*?)  +onednn:0")))
    return "";
  return m[1];
}

class Int8 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!TANDEM_HAVE_ONEDNN) GTEST_SKIP() << "plugins/onednn is not part of this build";
    if (!fs::exists(kData)) GTEST_SKIP() << kData << " is not installed (Debian: dataset-fashion-mnist)";
  }
  // A run directory trained for `steps` steps on onednn.
  std::string train(int steps) {
    const std::string run = file("run");
    const CliRun r = tandem("train '" + kModel + "' --set train.steps=" + std::to_string(steps) +
                            " --run-dir '" + run + "'" + kDevice);
    EXPECT_EQ(r.code, 0) << r.output;
    return run;
  }
  std::string file(const std::string& name) const { return dir_.file(name); }

  tandem::test::TempDir dir_;
};

TEST_F(Int8, QuantizedMlpMatchesF32WithinHalfAPoint) {
  // 300 steps (0.64 epoch): about 85% test accuracy in a few seconds.
  const std::string run = train(300);
  const CliRun f32 = tandem("eval '" + kModel + "' --weights '" + run + "'" + kDevice);
  ASSERT_EQ(f32.code, 0) << f32.output;
  const double f32_accuracy = accuracy_of(f32.output);
  ASSERT_GT(f32_accuracy, 0.75) << f32.output;
  const std::string features = onednn_features();
  ASSERT_FALSE(features.empty()) << tandem("devices").output;
  const bool seven_bits = features.find("vnni") == std::string::npos;
  // Each calibrator once; per-tensor and per-channel weights both covered.
  for (const auto& [calibrator, granularity] : {std::pair<std::string, std::string>{"minmax", ""},
                                                {"percentile", " --per-channel"},
                                                {"entropy", ""}}) {
    SCOPED_TRACE(calibrator + granularity);
    const std::string out = file("int8-" + calibrator);
    const CliRun q = tandem("quantize '" + kModel + "' --weights '" + run + "' --calib 512 --calibrator " +
                            calibrator + granularity + " --output '" + out + "'" + kDevice);
    ASSERT_EQ(q.code, 0) << q.output;
    EXPECT_NE(q.output.find("calibrated 512 samples with " + calibrator), std::string::npos) << q.output;
    std::ifstream json(out + "/calibration.json");
    const std::string text((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(seven_bits ? "\"weight_qmax\": 63" : "\"weight_qmax\": 127"), std::string::npos)
        << features << "\n"
        << text;
    EXPECT_NE(q.output.find(seven_bits ? "7-bit weights: onednn:0" : "8-bit weights: onednn:0"),
              std::string::npos)
        << q.output;
    const CliRun e = tandem("eval '" + kModel + "' --weights '" + out + "'" + kDevice);
    ASSERT_EQ(e.code, 0) << e.output;
    EXPECT_NE(e.output.find(", int8)"), std::string::npos) << e.output;
    EXPECT_NEAR(accuracy_of(e.output), f32_accuracy, 0.005) << e.output;
  }
}

TEST_F(Int8, CnnRunsConvolutionsAndLinearsInInt8) {
  // 40 steps of the Fashion-MNIST CNN (~70%): enough to compare f32 and INT8
  // on the same weights through conv2d_int8 and linear_int8.
  const std::string cnn = std::string(TANDEM_SOURCE_DIR) + "/examples/fmnist_cnn.toml";
  const std::string run = file("cnn");
  ASSERT_EQ(tandem("train '" + cnn + "' --set train.steps=40 --run-dir '" + run + "'" + kDevice).code, 0);
  const CliRun f32 = tandem("eval '" + cnn + "' --weights '" + run + "'" + kDevice);
  ASSERT_EQ(f32.code, 0) << f32.output;
  const std::string out = file("cnn-int8");
  const CliRun q = tandem("quantize '" + cnn + "' --weights '" + run +
                          "' --calib 256 --per-channel --output '" + out + "'" + kDevice);
  ASSERT_EQ(q.code, 0) << q.output;
  for (const char* layer : {"conv1:", "conv2:", "fc1:", "fc2:"})
    EXPECT_NE(q.output.find(layer), std::string::npos) << q.output;
  std::ifstream json(out + "/calibration.json");
  const std::string text((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"op\": \"conv2d\""), std::string::npos) << text;
  const CliRun e = tandem("eval '" + cnn + "' --weights '" + out + "'" + kDevice);
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NEAR(accuracy_of(e.output), accuracy_of(f32.output), 0.01) << f32.output << e.output;
}

TEST_F(Int8, BrokenOrMissingCalibrationFileIsAnInputError) {
  const std::string run = train(10);  // the files matter here, not the accuracy
  const std::string out = file("int8");
  ASSERT_EQ(tandem("quantize '" + kModel + "' --weights '" + run + "' --output '" + out + "'" + kDevice).code,
            0);
  // The INT8 checkpoint alone, without its calibration.json.
  const std::string lone = file("lone");
  fs::create_directories(lone);
  fs::copy_file(out + "/model-int8.safetensors", lone + "/model-int8.safetensors");
  CliRun r = tandem("eval '" + kModel + "' --weights '" + lone + "/model-int8.safetensors'" + kDevice);
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_NE(r.output.find(lone + "/calibration.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tandem quantize"), std::string::npos) << r.output;
  // A truncated calibration.json.
  std::ofstream(out + "/calibration.json", std::ios::trunc) << "{\"format\": \"tandem-int8-calib";
  r = tandem("eval '" + kModel + "' --weights '" + out + "'" + kDevice);
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_NE(r.output.find("malformed calibration file"), std::string::npos) << r.output;
  // Quantizing an INT8 checkpoint again is refused.
  r = tandem("quantize '" + kModel + "' --weights '" + out + "/model-int8.safetensors' --output '" +
             file("again") + "'" + kDevice);
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_NE(r.output.find("already an INT8 checkpoint"), std::string::npos) << r.output;
}

}  // namespace
