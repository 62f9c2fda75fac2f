// The host and the conformance kit give the same verdict on the same broken
// plugins (broken_backend.cpp): what the host refuses to load, the kit
// refuses with the host's message; what a kernel does wrong at run time,
// the kit reports for the case and the host for the node (in its debug
// modes where the fault is silent otherwise). Each test prints what a
// plugin author sees from both with TANDEM_SHOW_VERDICTS=1.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "shell.hpp"
#include "temp_dir.hpp"

namespace tandem::test {
namespace {

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing '" << (part) << "' in:\n" << (text)

std::string plugin_dir(const std::string& variant) {
  return std::string(BROKEN_PLUGIN_ROOT) + "/" + variant;
}

// A relu layer pinned to the broken backend between two linear layers on
// reference: its forward, its gradient and the copies around it run there.
constexpr const char* kModel = R"([model]
input = [8]
classes = 4
[[layers]]
name = "fc1"
op = "linear"
out_features = 16
[[layers]]
name = "act"
op = "relu"
device = "broken:0"
[[layers]]
name = "fc2"
op = "linear"
out_features = 4
[train]
batch_size = 8
steps = 4
seed = 3
[data]
format = "synthetic"
synthetic_samples = 64
synthetic_test_samples = 16
)";

void show(const std::string& who, const CliRun& run) {
  if (std::getenv("TANDEM_SHOW_VERDICTS") != nullptr)
    std::cout << "---- " << who << " (exit " << run.code << ")\n" << run.output << "\n";
}

class Verdict : public ::testing::Test {
 public:
  // `tandem [global] COMMAND` in the test's directory, with the variant's
  // plugin directory on the plugin path.
  CliRun tandem(const std::string& variant, const std::string& global, const std::string& command) {
    std::ofstream(dir.file("model.toml")) << kModel;
    CliRun run = shell("cd '" + dir.file("") +
                       "' && env -u TANDEM_PLUGIN_PATH TANDEM_CACHE_DIR=costs '" TANDEM_EXE
                       "' --allow-insecure-plugins --plugin-path '" +
                       plugin_dir(variant) + "' " + global + " " + command);
    show("tandem " + command + ", plugin " + variant, run);
    return run;
  }
  // `tandem train` of kModel, the relu layer on the variant.
  CliRun host(const std::string& variant, const std::string& options = "") {
    return tandem(variant, "", "train model.toml --run-dir run --device reference:0 " + options);
  }
  // `tandem-conformance` on the variant, relu and relu_grad cases.
  CliRun kit(const std::string& variant, const std::string& options = "") {
    CliRun run = shell("'" TANDEM_CONFORMANCE_DRIVER "' --allow-insecure-plugins --plugin '" +
                       plugin_dir(variant) + "/libtandem-broken.so' --op relu --op relu_grad " + options);
    show("tandem-conformance " + options + ", plugin " + variant, run);
    return run;
  }
  TempDir dir;
};

TEST_F(Verdict, ACorrectPluginTrainsAndPasses) {
  const CliRun h = host("good", "--check-bounds --poison-outputs --check-numerics");
  EXPECT_EQ(h.code, 0) << h.output;
  const CliRun k = kit("good");
  EXPECT_EQ(k.code, 0) << k.output;
  EXPECT_HAS(k.output, "10 passed, 0 failed, 20 unsupported");
}

// Refused at load by both, with one message (tandem/plugin_check.hpp).
void expect_refused_by_both(const CliRun& h, const CliRun& k, const std::string& reason) {
  EXPECT_NE(h.code, 0) << h.output;
  EXPECT_HAS(h.output, reason);
  EXPECT_EQ(k.code, 2) << k.output;
  EXPECT_HAS(k.output, reason);
}

TEST_F(Verdict, ANullRequiredFunction) {
  expect_refused_by_both(host("null_launch"), kit("null_launch"), "lacks required functions: kernel_launch");
}

TEST_F(Verdict, ADescriptorOfZeroBytes) {
  expect_refused_by_both(host("struct_zero"), kit("struct_zero"),
                         "returned a descriptor of 0 bytes, smaller than the ABI 1.0 minimum");
}

TEST_F(Verdict, AnotherAbiMajor) {
  expect_refused_by_both(host("abi_major"), kit("abi_major"), "was built for Tandem ABI 2.0");
}

// A descriptor that claims an installed plugin's name. --override-plugin
// lets it through in both, with a warning.
TEST_F(Verdict, ADescriptorWithAnInstalledPluginsName) {
  expect_refused_by_both(host("shadow"), kit("shadow"), "it is named 'reference', like the installed plugin");
  const std::string warning =
      "warning: plugin 'reference' is " + plugin_dir("shadow") + "/libtandem-broken.so";
  const CliRun k = kit("shadow", "--override-plugin reference");
  EXPECT_EQ(k.code, 0) << k.output;
  EXPECT_HAS(k.output, warning);
  const CliRun h = tandem("shadow", "--override-plugin reference", "plugins");
  EXPECT_EQ(h.code, 0) << h.output;
  EXPECT_HAS(h.output, warning);
}

// A file named like an installed plugin is refused before it is opened.
TEST_F(Verdict, AFileWithAnInstalledPluginsName) {
  TempDir own;
  std::filesystem::copy_file(plugin_dir("good") + "/libtandem-broken.so", own.file("libtandem-reference.so"));
  const CliRun h =
      shell("env -u TANDEM_PLUGIN_PATH '" TANDEM_EXE "' --allow-insecure-plugins --plugin-path '" +
            own.file("") + "' plugins");
  EXPECT_HAS(h.output, "it is named 'reference', like the installed plugin");
  const CliRun k = shell("'" TANDEM_CONFORMANCE_DRIVER "' --allow-insecure-plugins --plugin '" +
                         own.file("libtandem-reference.so") + "' --op relu");
  EXPECT_EQ(k.code, 2) << k.output;
  EXPECT_HAS(k.output, "it is named 'reference', like the installed plugin");
}

// An exception out of the entry point or init: that plugin is skipped with
// the reason, and every other command goes on (rules 12 and 14).
void expect_skipped_by_host_and_refused_by_kit(Verdict& v, const std::string& variant,
                                               const std::string& reason) {
  const CliRun plugins = v.tandem(variant, "", "plugins -v");
  EXPECT_EQ(plugins.code, 0) << plugins.output;
  EXPECT_HAS(plugins.output, "skipped " + plugin_dir(variant) + "/libtandem-broken.so");
  EXPECT_HAS(plugins.output, reason);
  EXPECT_HAS(plugins.output, "rule 14");
  const CliRun devices = v.tandem(variant, "", "devices");
  EXPECT_EQ(devices.code, 0) << devices.output;
  EXPECT_HAS(devices.output, "reference:0");
  const CliRun k = v.kit(variant);
  EXPECT_EQ(k.code, 2) << k.output;
  EXPECT_HAS(k.output, reason);
}

TEST_F(Verdict, AnEntryPointThatThrowsIsSkipped) {
  expect_skipped_by_host_and_refused_by_kit(
      *this, "entry_throws", "a C++ exception escaped from tdm_plugin_entry: broken: the entry point threw");
}

TEST_F(Verdict, AnInitThatThrowsIsSkipped) {
  expect_skipped_by_host_and_refused_by_kit(*this, "init_throws",
                                            "a C++ exception escaped from init: broken: init threw");
}

TEST_F(Verdict, AKernelThatThrows) {
  const CliRun h = host("throws");
  EXPECT_EQ(h.code, 3) << h.output;
  EXPECT_HAS(h.output, "node 'act' (layer 'act', relu) failed on broken:0");
  EXPECT_HAS(h.output, "a C++ exception escaped from kernel_launch: broken: the kernel threw");
  const CliRun k = kit("throws");
  EXPECT_EQ(k.code, 1) << k.output;
  EXPECT_HAS(k.output, "FAIL relu f32");
  EXPECT_HAS(k.output, "a C++ exception escaped from kernel_launch: broken: the kernel threw");
}

// Silent in a normal run (the bytes after an output belong to some other
// tensor, or to nothing); --check-bounds names the node, the kit the case.
TEST_F(Verdict, AKernelThatWritesPastItsOutput) {
  const CliRun h = host("overrun", "--check-bounds");
  EXPECT_EQ(h.code, 3) << h.output;
  EXPECT_HAS(h.output, "--check-bounds: node 'act' (layer 'act', relu) on broken:0 wrote past the end of");
  EXPECT_HAS(h.output, "16 bytes changed, +0..+15 after it");
  const CliRun k = kit("overrun");
  EXPECT_EQ(k.code, 1) << k.output;
  EXPECT_HAS(k.output, "FAIL relu f32");
  EXPECT_HAS(k.output, "the kernel wrote past the end of output 0");
  EXPECT_HAS(k.output, "16 bytes changed, +0..+15 after it");
}

// The output keeps what was there before: --poison-outputs makes that NaN,
// --check-numerics names the node; the kit poisons every output.
TEST_F(Verdict, AKernelThatLeavesItsOutputUnwritten) {
  const CliRun h = host("unwritten", "--poison-outputs --check-numerics");
  EXPECT_NE(h.code, 0) << h.output;
  EXPECT_HAS(h.output,
             "node 'act' (layer 'act', relu) on broken:0 is the first node whose output is not finite");
  const CliRun k = kit("unwritten");
  EXPECT_EQ(k.code, 1) << k.output;
  EXPECT_HAS(k.output, "FAIL relu f32");
}

// Only the kit sees this one: the host does not read a node's inputs back.
TEST_F(Verdict, AKernelThatWritesItsInputFailsConformance) {
  const CliRun k = kit("writes_input");
  EXPECT_EQ(k.code, 1) << k.output;
  EXPECT_HAS(k.output, "the kernel wrote into input 0, which it must only read");
}

// `tandem eval` runs a pinned layer where the model file pins it: trained
// with the correct plugin, evaluated with the one that throws, the failure
// names the pinned node on broken:0.
TEST_F(Verdict, EvalHonoursTheModelFilesPinsAndExitsThreeOnAPluginFailure) {
  ASSERT_EQ(host("good").code, 0);
  const CliRun good = tandem("good", "", "eval model.toml --weights run --device reference:0");
  EXPECT_EQ(good.code, 0) << good.output;
  const CliRun eval = tandem("throws", "", "eval model.toml --weights run --device reference:0");
  EXPECT_EQ(eval.code, 3) << eval.output;
  EXPECT_HAS(eval.output, "node 'act' (layer 'act', relu) failed on broken:0");
}

// `tandem plan` checks every node `tandem train` will run, the evaluation
// at each epoch's end included: a batch_norm layer pinned to a backend that
// trains it but has no batch_norm_inference is refused by plan, and by
// train before its first step, not after an epoch of training.
TEST_F(Verdict, PlanRefusesWhatTheFirstEvaluationWouldFail) {
  std::string model = kModel;
  model.replace(model.find("op = \"relu\""), 11, "op = \"batch_norm\"");
  std::ofstream(dir.file("bn.toml")) << model;
  const CliRun plan = tandem("no_bn_eval", "", "plan bn.toml --device reference:0");
  EXPECT_NE(plan.code, 0) << plan.output;
  EXPECT_HAS(plan.output, "the evaluation at each epoch's end cannot run as placed");
  EXPECT_HAS(plan.output, "batch_norm_inference");
  EXPECT_HAS(plan.output, "broken: no batch_norm_inference");
  const CliRun train = tandem("no_bn_eval", "", "train bn.toml --run-dir run --device reference:0");
  EXPECT_NE(train.code, 0) << train.output;
  EXPECT_HAS(train.output, "the evaluation at each epoch's end cannot run as placed");
  EXPECT_EQ(train.output.find("epoch 1/"), std::string::npos) << train.output;
}

}  // namespace
}  // namespace tandem::test
