// The host side of feature plugins, with purpose-built plugins: a missing
// plugin and a declared conflict are explained, a graph pass's annotations
// reach the graph, a hook that skips the optimizer step or zeroes the
// learning rate leaves the weights untouched.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "device/device.hpp"
#include "model/model_parser.hpp"
#include "plugin/registry.hpp"
#include "temp_dir.hpp"
#include "train/trainer.hpp"

namespace tandem::test {
namespace {

const char* kModel = R"([model]
input = [8]
classes = 4
[[layers]]
name = "fc"
op = "linear"
out_features = 4
[train]
lr = 0.1
batch_size = 16
steps = 6
[data]
format = "synthetic"
synthetic_samples = 64
synthetic_test_samples = 0
)";

class Features : public ::testing::Test {
 protected:
  void SetUp() override {
    host::DiscoveryOptions options;
    options.plugin_paths = {TANDEM_BUILD_PLUGIN_DIR, TANDEM_TEST_FEATURE_DIR};
    options.env_path = "";
    options.install_dir = std::filesystem::path();
    options.exe_relative_dir = std::filesystem::path();
    options.allow_insecure = true;
    registry_.emplace(host::PluginRegistry::discover(options, services_));
    auto device = host::DeviceHandle::open(*registry_->find("reference"), 0);
    ASSERT_TRUE(device.ok()) << device.error().message;
    device_.emplace(std::move(device.value()));
  }

  host::Result<std::unique_ptr<host::train::Trainer>> trainer(const std::vector<std::string>& overrides) {
    auto spec = host::model::parse_model_text(kModel, "f.toml", overrides);
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    spec_ = *spec;
    host::train::TrainOptions o;
    o.run_dir = dir_.file("run");
    return host::train::Trainer::create(*spec_, *device_, *registry_, o);
  }

  std::vector<float> weights(host::train::Trainer& t) {
    const auto* v = t.model().graph.value_by_name("fc.weight");
    std::vector<float> w(32);
    EXPECT_TRUE(t.executor().read(v->id, w.data(), w.size() * sizeof(float)).ok());
    return w;
  }

  host::HostServices services_;
  std::optional<host::PluginRegistry> registry_;
  std::optional<host::DeviceHandle> device_;
  std::optional<host::model::ModelSpec> spec_;
  TempDir dir_;
};

TEST_F(Features, MissingFeaturePluginIsExplained) {
  auto t = trainer({"features.nosuchfeature.level=1"});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("[features.nosuchfeature] needs a feature plugin named 'nosuchfeature'"),
            std::string::npos)
      << t.error().message;
}

TEST_F(Features, DeclaredConflictIsExplained) {
  auto t = trainer({"features.testfeature.annotate=true", "features.testrival.annotate=true"});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("cannot be combined"), std::string::npos) << t.error().message;
}

TEST_F(Features, BadConfigurationNamesTheFeature) {
  auto t = trainer({"features.testfeature.skip_every=-1"});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("feature 'testfeature' ("), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find("libtandem-testfeature.so) failed in create"), std::string::npos)
      << t.error().message;
  EXPECT_NE(t.error().message.find("skip_every must not be negative"), std::string::npos)
      << t.error().message;
}

TEST_F(Features, GraphPassAnnotatesBackwardNodes) {
  auto t = trainer({"features.testfeature.annotate=true"});
  ASSERT_TRUE(t.ok()) << t.error().message;
  const host::Graph& g = (*t)->model().graph;
  size_t backward = 0, seen = 0;
  for (size_t i = 0; i < g.node_count(); ++i) {
    const host::Node& n = *g.node_at(i);
    backward += n.phase == TDM_PHASE_BACKWARD;
    seen += n.annotations.count("testfeature.seen");
  }
  EXPECT_GT(backward, 0u);
  EXPECT_EQ(seen, backward);
}

TEST_F(Features, SkippedOptimizerStepsLeaveWeightsUnchanged) {
  auto t = trainer({"features.testfeature.skip_every=1"});
  ASSERT_TRUE(t.ok()) << t.error().message;
  const auto before = weights(**t);
  ASSERT_TRUE((*t)->run().ok());
  EXPECT_EQ(weights(**t), before);
}

TEST_F(Features, HookWritesRunAccess) {
  auto t = trainer({"features.testfeature.zero_lr=true"});
  ASSERT_TRUE(t.ok()) << t.error().message;
  const auto before = weights(**t);
  ASSERT_TRUE((*t)->run().ok());
  EXPECT_EQ(weights(**t), before) << "step_begin set optim.lr to 0, so SGD must not move the weights";
}

// An exception out of a hook (a plugin that lets one through its C table)
// stops the run naming the plugin's file and the hook; the host goes on.
TEST_F(Features, AnExceptionOutOfAHookStopsTheRunNamingTheFileAndTheHook) {
  auto t = trainer({"features.testfeature.escape_from_step_end=true"});
  ASSERT_TRUE(t.ok()) << t.error().message;
  auto r = (*t)->run();
  ASSERT_FALSE(r.ok());
  const std::string& why = r.error().message;
  EXPECT_NE(why.find("feature 'testfeature' ("), std::string::npos) << why;
  EXPECT_NE(why.find("libtandem-testfeature.so) failed in step_end"), std::string::npos) << why;
  EXPECT_NE(why.find("testfeature: thrown out of on_step_end"), std::string::npos) << why;
  t->reset();                // releases the run directory
  auto again = trainer({});  // the next run, in the same process, is unaffected
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE((*again)->run().ok());
}

TEST_F(Features, WithoutTheFeatureWeightsMove) {
  auto t = trainer({});
  ASSERT_TRUE(t.ok()) << t.error().message;
  const auto before = weights(**t);
  ASSERT_TRUE((*t)->run().ok());
  EXPECT_NE(weights(**t), before);
}

}  // namespace
}  // namespace tandem::test
