#include "bad_input.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

namespace tandem::test {
namespace fs = std::filesystem;
namespace {

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

struct Outcome {
  bool exited = false;
  int code = -1;
  int signal = 0;
  std::string output;
};

Outcome run(const std::string& command) {
  Outcome o;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return o;
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) o.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  o.exited = WIFEXITED(status);
  o.code = o.exited ? WEXITSTATUS(status) : -1;
  // The shell reports a child killed by a signal as 128 + the signal.
  if (o.exited && o.code > 128 && o.code < 128 + 32 && o.code != 130) o.signal = o.code - 128;
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  return o;
}

// Every regular file under `dir` and its bytes.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec)) files[it->path().string()] = read_file(it->path().string());
  return files;
}

// What only a crash or an unhandled exception prints.
const char* const kRawTexts[] = {"std::",       "basic_string",     "vector::", "bad_alloc",
                                 "what():",     "terminate called", "Aborted",  "Segmentation",
                                 "core dumped", "[json.exception"};

}  // namespace

const char* const kBaseModel = R"([model]
name = "case"
input = [1, 8, 8]
classes = 4

[[layers]]
name = "conv1"
op = "conv2d"
out_channels = 4
kernel = 3
padding = 1
bias = true

[[layers]]
name = "pool1"
op = "max_pool2d"
kernel = 2

[[layers]]
name = "flat"
op = "flatten"

[[layers]]
name = "fc"
op = "linear"
out_features = 4

[train]
lr = 0.05
momentum = 0.9
batch_size = 8
epochs = 1
seed = 1

[data]
format = "idx"
train_images = "train-images.idx"
train_labels = "train-labels.idx"
test_images = "test-images.idx"
test_labels = "test-labels.idx"
)";

const char* const kCsvModel = R"([model]
name = "csv"
input = [8]
classes = 4

[[layers]]
name = "fc"
op = "linear"
out_features = 4

[train]
lr = 0.05
batch_size = 4
epochs = 1

[data]
format = "csv"
train_csv = "data.csv"
label_column = 0
)";

std::ostream& operator<<(std::ostream& out, const BadInput& c) {
  return out << c.name;
}

std::string base_model_with(const std::string& from, const std::string& to) {
  std::string text = kBaseModel;
  const size_t at = text.find(from);
  if (at == std::string::npos || text.find(from, at + 1) != std::string::npos) {
    ADD_FAILURE() << "the base model holds '" << from << "' not exactly once";
    return text;
  }
  return text.replace(at, from.size(), to);
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace {
void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}
}  // namespace

std::string idx_images(uint32_t n, uint32_t rows, uint32_t cols) {
  std::string out;
  put_u32(out, 0x00000803);
  put_u32(out, n);
  put_u32(out, rows);
  put_u32(out, cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i) out.push_back(static_cast<char>((i * 37 + i / 64) & 0xff));
  return out;
}

std::string idx_labels(uint32_t n, uint32_t classes) {
  std::string out;
  put_u32(out, 0x00000801);
  put_u32(out, n);
  for (uint32_t i = 0; i < n; ++i) out.push_back(static_cast<char>(i % classes));
  return out;
}

void write_base_files(const std::string& dir) {
  write_file(dir + "/model.toml", kBaseModel);
  write_file(dir + "/train-images.idx", idx_images(64, 8, 8));
  write_file(dir + "/train-labels.idx", idx_labels(64, 4));
  write_file(dir + "/test-images.idx", idx_images(16, 8, 8));
  write_file(dir + "/test-labels.idx", idx_labels(16, 4));
  std::string csv;
  for (int row = 0; row < 16; ++row) {
    csv += std::to_string(row % 4);
    for (int f = 0; f < 8; ++f) csv += "," + std::to_string(0.125 * ((row * 8 + f) % 11));
    csv += "\n";
  }
  write_file(dir + "/data.csv", csv);
  write_file(dir + "/csv.toml", kCsvModel);
}

void copy_trained_checkpoint(const std::string& dest) {
  static TempDir trained;
  static std::string checkpoint;
  static std::once_flag once;
  std::call_once(once, [] {
    write_base_files(trained.file(""));
    const Outcome o = run("cd '" + trained.file("") +
                          "' && env -u TANDEM_PLUGIN_PATH '" TANDEM_EXE
                          "' --allow-insecure-plugins train model.toml --device reference --run-dir run");
    ASSERT_EQ(o.code, 0) << o.output;
    checkpoint = trained.file("run/checkpoints/step-000000008.safetensors");
  });
  ASSERT_TRUE(fs::exists(checkpoint)) << "the trained checkpoint is missing";
  fs::copy_file(checkpoint, dest, fs::copy_options::overwrite_existing);
}

void run_bad_input(const BadInput& c) {
  TempDir temp;
  const std::string dir = fs::path(temp.file("")).parent_path().string();
  write_base_files(dir);
  if (c.setup) c.setup(dir);
  const auto before = snapshot(dir);
  const std::string args = replaced(c.args, "{d}", dir);
  const bool secure = args.find("--secure-plugins") != std::string::npos;
  const Outcome o = run("cd '" + dir + "' && env -u TANDEM_PLUGIN_PATH TANDEM_CACHE_DIR='" + dir +
                        "/.cache' '" TANDEM_EXE "'" + (secure ? "" : " --allow-insecure-plugins") + " " +
                        replaced(args, "--secure-plugins", "") + " </dev/null");
  SCOPED_TRACE("tandem " + args + "\n" + o.output);
  // For reading every message at once: TANDEM_BAD_INPUT_SHOW=1.
  if (std::getenv("TANDEM_BAD_INPUT_SHOW") != nullptr)
    std::cout << "[" << c.name << "] exit " << o.code << ": " << replaced(o.output, dir + "/", "")
              << std::flush;
  EXPECT_EQ(o.signal, 0) << "killed by signal " << o.signal;
  EXPECT_TRUE(o.exited);
  EXPECT_NE(o.code, 0) << "accepted silently";
  if (c.code != 0) {
    EXPECT_EQ(o.code, c.code);
  }
  EXPECT_NE(o.output.find("tandem: error: "), std::string::npos) << "no error line";
  for (const std::string& part : c.says) {
    const std::string wanted = replaced(part, "{d}", dir);
    EXPECT_NE(o.output.find(wanted), std::string::npos) << "the message does not say '" << wanted << "'";
  }
  for (const char* raw : kRawTexts) EXPECT_EQ(o.output.find(raw), std::string::npos) << "raw text: " << raw;
  const auto after = snapshot(dir);
  for (const auto& [path, bytes] : before) {
    auto it = after.find(path);
    EXPECT_TRUE(it != after.end()) << path << " was removed";
    if (it != after.end()) {
      EXPECT_TRUE(it->second == bytes) << path << " was changed";
    }
  }
}

}  // namespace tandem::test
