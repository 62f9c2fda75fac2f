// What the tests of `tandem train` share: running the built CLI as a user
// does, a small synthetic model, and a scratch directory per test.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "shell.hpp"
#include "temp_dir.hpp"

namespace tandem::test {

// `env`: more VAR=value words for the environment of the run. The op-cost
// cache is shared by the tests of one directory: measuring once is enough.
inline CliRun tandem(const std::string& args, const std::string& env = "") {
  return shell("env -u TANDEM_PLUGIN_PATH TANDEM_CACHE_DIR=tandem-cost-cache " + env +
               " '" TANDEM_EXE "' --allow-insecure-plugins " + args);
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing '" << (part) << "' in:\n" << (text)

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// 4 classes of 8 features, 32 steps of 8 samples per epoch.
inline const char* kSynthetic = R"([model]
name = "tiny"
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
batch_size = 8
epochs = 2
seed = 3
[data]
format = "synthetic"
synthetic_samples = 256
synthetic_test_samples = 64
)";

class CliTest : public ::testing::Test {
 protected:
  std::string model(const std::string& text, const std::string& name = "m.toml") {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  }
  TempDir dir;
};

}  // namespace tandem::test
