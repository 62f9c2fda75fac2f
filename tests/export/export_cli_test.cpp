// `tandem export` as a user runs it: what it writes, and what it refuses
// (each with the documented exit code, a message naming the file or option,
// and nothing written).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "shell.hpp"
#include "temp_dir.hpp"

namespace tandem::test {
namespace {

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing '" << (part) << "' in:\n" << (text)

constexpr const char* kModel = R"([model]
name = "tiny"
input = [1, 6, 6]
classes = 3
[[layers]]
name = "conv"
op = "conv2d"
out_channels = 4
kernel = 3
padding = 1
[[layers]]
name = "bn"
op = "batch_norm"
[[layers]]
name = "act"
op = "relu"
[[layers]]
name = "pool"
op = "max_pool2d"
kernel = 2
[[layers]]
name = "fc"
op = "linear"
out_features = 3
[train]
batch_size = 8
steps = 4
[data]
format = "synthetic"
synthetic_samples = 32
synthetic_test_samples = 8
)";

class ExportCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir.file("m.toml")) << kModel;
    trained = tandem("train m.toml --run-dir run --device reference");
  }
  CliRun tandem(const std::string& args) {
    return shell("cd '" + dir.file("") +
                 "' && env -u TANDEM_PLUGIN_PATH '" TANDEM_EXE "' --allow-insecure-plugins " + args);
  }
  TempDir dir;
  CliRun trained;
};

TEST_F(ExportCli, WritesAnOnnxModelAndPyTorchWeights) {
  ASSERT_EQ(trained.code, 0) << trained.output;
  CliRun onnx = tandem("export m.toml --weights run --output m.onnx");
  ASSERT_EQ(onnx.code, 0) << onnx.output;
  EXPECT_HAS(onnx.output, "ONNX opset 17");
  EXPECT_HAS(onnx.output, "input \"input\", output \"logits\"");
  EXPECT_GT(std::filesystem::file_size(dir.file("m.onnx")), 0u);
  CliRun torch = tandem("export m.toml --weights run --format safetensors --output m.safetensors");
  ASSERT_EQ(torch.code, 0) << torch.output;
  // conv weight, bias; bn weight, bias, running_mean, running_var, num_batches_tracked; fc weight, bias
  EXPECT_HAS(torch.output, "9 tensors");
  std::ifstream in(dir.file("m.safetensors"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* name : {"\"bn.weight\"", "\"bn.bias\"", "\"bn.num_batches_tracked\"", "\"conv.weight\""})
    EXPECT_HAS(bytes.substr(0, 4096), name);
  EXPECT_EQ(bytes.substr(0, 4096).find("\"bn.gamma\""), std::string::npos);
  // Read back: PyTorch's names become Tandem's again.
  CliRun back = tandem("eval m.toml --weights m.safetensors --device reference");
  CliRun original = tandem("eval m.toml --weights run --device reference");
  ASSERT_EQ(back.code, 0) << back.output;
  EXPECT_EQ(back.output.substr(0, back.output.find(" (")),
            original.output.substr(0, original.output.find(" (")));
}

TEST_F(ExportCli, RefusesWhatItCannotWrite) {
  ASSERT_EQ(trained.code, 0) << trained.output;
  CliRun missing = tandem("export m.toml --weights run");
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_HAS(missing.output, "--output");
  CliRun format = tandem("export m.toml --weights run --format tflite --output x");
  EXPECT_EQ(format.code, 2) << format.output;
  EXPECT_HAS(format.output, "--format tflite: expected onnx, safetensors, hf or peft");
  // Weights of another model: named, nothing written.
  std::string other = kModel;
  other.replace(other.find("out_channels = 4"), 16, "out_channels = 5");
  std::ofstream(dir.file("other.toml")) << other;
  CliRun wrong = tandem("export other.toml --weights run --output other.onnx");
  EXPECT_EQ(wrong.code, 4) << wrong.output;
  EXPECT_HAS(wrong.output, "tensor 'conv.weight' is [4,1,3,3]");
  EXPECT_FALSE(std::filesystem::exists(dir.file("other.onnx")));
  CliRun nowhere = tandem("export m.toml --weights run --output /nonexistent/dir/m.onnx");
  EXPECT_NE(nowhere.code, 0) << nowhere.output;
  EXPECT_HAS(nowhere.output, "/nonexistent/dir/m.onnx");
}

}  // namespace
}  // namespace tandem::test
