// The `tandem` program as a user runs it: output and exit codes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "shell.hpp"
#include "tandem/version.h"
#include "temp_dir.hpp"

namespace {

using tandem::test::CliRun;
using tandem::test::shell;
using tandem::test::TempDir;

// TANDEM_PLUGIN_PATH is cleared so only the build tree is searched.
CliRun tandem(const std::string& args) {
  return shell("env -u TANDEM_PLUGIN_PATH '" TANDEM_EXE "' " + args);
}

// Under a umask of 002 the build tree is group-writable and the host
// rightly refuses it; these tests are about the CLI, not that check.
std::string plugin_flags() {
  struct stat st {};
  if (::stat(TANDEM_BUILD_PLUGIN_DIR, &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return " --allow-insecure-plugins";
  return "";
}

void require_reference() {
  if (!TANDEM_HAVE_REFERENCE) GTEST_SKIP() << "plugins/reference is not part of this build";
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing '" << (part) << "' in:\n" << (text)

TEST(Cli, Version) {
  CliRun r = tandem("--version");
  EXPECT_EQ(r.code, 0);
  // The release, the commit baked in at build time (a git checkout gives
  // 12 hex digits, a tree without git "unknown") and the ABI.
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(^tandem \d+\.\d+\.\d+\n)"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\ncommit ([0-9a-f]{12}(-dirty)?|unknown)\n)")))
      << r.output;
  EXPECT_HAS(r.output, std::string("SDK " TDM_SDK_VERSION ", ABI ") + std::to_string(TDM_ABI_MAJOR) + "." +
                           std::to_string(TDM_ABI_MINOR));
}

TEST(Cli, TopLevelHelpListsCommandsAndExitCodes) {
  CliRun r = tandem("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_HAS(r.output, "plugins");
  EXPECT_HAS(r.output, "devices");
  EXPECT_HAS(r.output, "--plugin-path");
  EXPECT_HAS(r.output, "--allow-insecure-plugins");
  EXPECT_HAS(r.output, "--log-level");
  EXPECT_HAS(r.output, "3  plugin error");
  EXPECT_HAS(r.output, "4  input, data or model file error");
}

TEST(Cli, HelpOnEverySubcommand) {
  for (const char* command : {"plugins", "devices"}) {
    CliRun r = tandem(std::string(command) + " --help");
    EXPECT_EQ(r.code, 0) << command;
    EXPECT_HAS(r.output, std::string("Usage: tandem ") + command);
    EXPECT_HAS(r.output, "--plugin-path");
    CliRun h = tandem(std::string("--help ") + command);
    EXPECT_EQ(h.code, 0) << command;
    EXPECT_HAS(h.output, std::string("Usage: tandem ") + command);
  }
  EXPECT_HAS(tandem("plugins -h").output, "--verbose");
}

// The commands the top-level help lists, in its order.
std::vector<std::string> listed_commands() {
  const std::string help = tandem("--help").output;
  std::vector<std::string> commands;
  const size_t start = help.find("Commands:\n"), end = help.find("\n\n", start);
  if (start == std::string::npos) return commands;
  std::istringstream lines(help.substr(start, end - start));
  std::string line;
  std::getline(lines, line);  // "Commands:"
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string command;
    if (words >> command) commands.push_back(command);
  }
  return commands;
}

// Every command's help shows its defaults as a user would type them: not
// a bare line break (generate's prompt once broke the line it sat on, in
// --help and in the manual page made from it) and not a binary fraction's
// digits (0.80000000000000004 for 0.8).
TEST(Cli, EveryCommandsHelpShowsItsDefaultsAsTyped) {
  const std::vector<std::string> commands = listed_commands();
  ASSERT_GE(commands.size(), 10u) << tandem("--help").output;
  for (const std::string& command : commands) {
    CliRun r = tandem(command + " --help");
    EXPECT_EQ(r.code, 0) << command;
    EXPECT_HAS(r.output, "Usage: tandem " + command);
    EXPECT_FALSE(std::regex_search(r.output, std::regex(R"(\(=\n)"))) << command << ":\n" << r.output;
    EXPECT_FALSE(std::regex_search(r.output, std::regex(R"(\(=-?\d*\.\d{7,}\))"))) << command << ":\n"
                                                                                   << r.output;
  }
}

TEST(Cli, UsageErrorsExitTwo) {
  CliRun r = tandem("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.output, "unknown command 'frobnicate'");
  EXPECT_EQ(tandem("").code, 2);
  EXPECT_EQ(tandem("--no-such-option plugins").code, 2);
  EXPECT_EQ(tandem("plugins --no-such-option").code, 2);
  CliRun level = tandem("--log-level loud plugins");
  EXPECT_EQ(level.code, 2);
  EXPECT_HAS(level.output, "unknown log level 'loud'");
  for (const char* bad : {"tf32", "cuda=1", ".tf32=1", "cuda.=1"}) {
    CliRun option = tandem(std::string("--plugin-option ") + bad + " plugins");
    EXPECT_EQ(option.code, 2) << bad;
    EXPECT_HAS(option.output, "expected NAME.KEY=VALUE");
  }
  EXPECT_EQ(tandem("--plugin-option cuda.tf32=true --plugin-option onednn.x=1 plugins").code, 0);
}

// The cuda plugin reads its options when it starts, GPU or not: a value it
// does not take is named with the values it does, and the plugin stays out.
TEST(Cli, ABadCudaOptionValueIsNamedWithTheValuesItTakes) {
  if (!TANDEM_HAVE_CUDA) GTEST_SKIP() << "plugins/cuda is not part of this build";
  const struct {
    const char* option;
    const char* takes;
  } cases[] = {{"cuda.conv_api=v7", "is not one of graph, legacy"},
               {"cuda.deterministic=yes", "is not one of prefer, require, any"},
               {"cuda.conv_workspace_limit=lots", "is not a size in bytes"}};
  for (const auto& c : cases) {
    CliRun r = tandem(std::string("--plugin-option ") + c.option + " plugins" + plugin_flags());
    EXPECT_HAS(r.output, std::string("--plugin-option ") + c.option + " " + c.takes);
    EXPECT_HAS(r.output, "libtandem-cuda.so");
  }
}

// A --plugin-path directory without plugins adds none: the rest of the
// search path still applies. Without any backend the exit code is 3
// (plugin error). A directory that does not exist is a usage error.
TEST(Cli, DevicesExitCodeFollowsBackends) {
  TempDir empty;
  CliRun r = tandem("--plugin-path " + empty.file("") + " devices --log-level error" + plugin_flags());
  if (TANDEM_HAVE_REFERENCE) {
    EXPECT_EQ(r.code, 0) << r.output;
  } else {
    EXPECT_EQ(r.code, 3) << r.output;
    EXPECT_HAS(r.output, "tandem plugins -v");
  }
}

TEST(Cli, PluginsVerboseListsReference) {
  require_reference();
  CliRun r = tandem("plugins -v" + plugin_flags());
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "NAME");
  EXPECT_HAS(r.output, "reference");
  EXPECT_HAS(r.output, "backend");
  EXPECT_HAS(r.output, "libtandem-reference.so");
  EXPECT_HAS(r.output, "Search path, in order:");
  EXPECT_HAS(r.output, "(build tree)");
  EXPECT_HAS(r.output, "loaded   ");
}

TEST(Cli, PluginPathSearchedFirstAndShown) {
  TempDir dirs;
  for (const char* d : {"a", "b", "c"}) std::filesystem::create_directory(dirs.file(d));
  CliRun r = tandem("--plugin-path " + dirs.file("a") + ":" + dirs.file("b") + " plugins -v --plugin-path " +
                    dirs.file("c") + plugin_flags());
  EXPECT_HAS(r.output, "1. " + dirs.file("a") + " (--plugin-path)");
  EXPECT_HAS(r.output, "2. " + dirs.file("b") + " (--plugin-path)");
  EXPECT_HAS(r.output, "3. " + dirs.file("c") + " (--plugin-path)");
  CliRun missing = tandem("--plugin-path /nonexistent/a plugins -v" + plugin_flags());
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_HAS(missing.output, "--plugin-path /nonexistent/a: no such directory");
}

TEST(Cli, DevicesListsReferenceWithMemory) {
  require_reference();
  CliRun r = tandem("devices" + plugin_flags());
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "reference:0");
  EXPECT_HAS(r.output, "cpu");
  EXPECT_HAS(r.output, "TOTAL");
  EXPECT_HAS(r.output, "iB");  // memory in binary units
}

// bench/run.sh and the figures quoted from `tandem bench --profile` rely on
// every model under bench/models building and training a step.
// bench/models/*.toml, not bench/models/gpu/: GPT-2 small and the 1.24 B
// Llama need a GPU's memory and speed for one step; nor bench/models/pipeline/:
// its devices are the onednn plugin's cores split in two (bench/pipeline.sh).
TEST(Cli, BenchProfilesAStepOfEveryBenchmarkModel) {
  require_reference();
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TANDEM_BENCH_MODELS)) {
    if (entry.path().extension() != ".toml") continue;
    ++models;
    SCOPED_TRACE(entry.path().string());
    const CliRun r = tandem("bench '" + entry.path().string() +
                            "' --steps 1 --repeats 1 --warmup 0 --profile" + plugin_flags());
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_HAS(r.output, "samples/s");
    EXPECT_HAS(r.output, "per step:");
  }
  EXPECT_GE(models, 6) << "bench/models lost its model files";
}

TEST(Cli, BenchListsTheSlowestNodesByName) {
  require_reference();
  const std::string model = std::string(" '") + TANDEM_BENCH_MODELS + "/gemm_mlp.toml'";
  const CliRun r =
      tandem("bench" + model + " --steps 2 --repeats 1 --warmup 1 --profile-nodes 3" + plugin_flags());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "per step:");  // --profile-nodes implies the profile
  const size_t at = r.output.find("slowest 3 of ");
  ASSERT_NE(at, std::string::npos) << r.output;
  // Three lines of node name, op and time, slowest first; the linear ops'
  // with their GFLOP/s. Which nodes they are depends on the machine's timing
  // (on a busy one a relu_grad outlasted the products), so the listing's
  // form is what is checked.
  const std::regex node(R"(\n    (\S+)\s+(\S+)\s+([0-9.]+) ms( +[0-9.]+ GFLOP/s)?)");
  const std::string listing = r.output.substr(at);
  std::vector<double> times;
  for (auto it = std::sregex_iterator(listing.begin(), listing.end(), node); it != std::sregex_iterator();
       ++it) {
    const std::smatch& m = *it;
    EXPECT_EQ(m[4].matched, m[2].str().rfind("linear", 0) == 0) << m[0];
    times.push_back(std::stod(m[3].str()));
  }
  EXPECT_EQ(times.size(), 3u) << listing;
  EXPECT_TRUE(std::is_sorted(times.rbegin(), times.rend())) << listing;
  const CliRun negative = tandem("bench" + model + " --profile-nodes -1" + plugin_flags());
  EXPECT_EQ(negative.code, 2) << negative.output;
  EXPECT_HAS(negative.output, "--profile-nodes");
}

}  // namespace
