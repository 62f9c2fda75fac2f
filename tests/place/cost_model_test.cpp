// The measured cost model of automatic placement: ops are timed once and
// cached on disk for one build of the plugin, an op a backend declines is
// remembered as unsupported, a
// corrupted cache is measured again rather than trusted, and copies between
// two devices cost more the more bytes they move.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "place/cost_model.hpp"
#include "reference_device.hpp"
#include "temp_dir.hpp"

namespace tandem::test {
namespace {

class CostModelTest : public ReferenceDevice {
 protected:
  host::place::CostModel model() {
    return host::place::CostModel({{"reference:0", &*device_}}, {dir_.file("cache"), "threads=1", true});
  }
  static host::exec::OpSpec relu(int64_t rows) {
    host::exec::OpSpec spec;
    spec.op = "relu";
    spec.node_name = "test.relu";
    spec.inputs = {host::TensorType{TDM_F32, {rows, 64}}};
    spec.outputs = {host::TensorType{TDM_F32, {rows, 64}}};
    return spec;
  }
  TempDir dir_;
};

TEST_F(CostModelTest, AnOpIsTimedOnceAndThenReadFromTheCache) {
  double first = 0;
  {
    auto costs = model();
    auto c = costs.op("reference:0", relu(256));
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_TRUE(c->supported);
    EXPECT_GT(c->micros, 0.0);
    first = c->micros;
    EXPECT_EQ(costs.calibrated(), 1u);
    auto again = costs.op("reference:0", relu(256));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(costs.calibrated(), 1u) << "the same op is not measured twice";
    ASSERT_TRUE(costs.save().ok());
    ASSERT_TRUE(std::filesystem::exists(costs.cache_file("reference:0")));
    std::ifstream in(costs.cache_file("reference:0"));
    const auto json = nlohmann::json::parse(in);
    EXPECT_EQ(json.at("identity").at("context"), "threads=1");
    EXPECT_TRUE(json.at("ops").contains(host::place::op_cost_key(relu(256))));
  }
  auto costs = model();
  auto cached = costs.op("reference:0", relu(256));
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(costs.calibrated(), 0u);
  EXPECT_DOUBLE_EQ(cached->micros, first);
  // Another shape is another op.
  ASSERT_TRUE(costs.op("reference:0", relu(512)).ok());
  EXPECT_EQ(costs.calibrated(), 1u);
  // --recalibrate: the cache is not read, what is measured is written.
  host::place::CostModel fresh({{"reference:0", &*device_}}, {dir_.file("cache"), "threads=1", false});
  ASSERT_TRUE(fresh.op("reference:0", relu(256)).ok());
  EXPECT_EQ(fresh.calibrated(), 1u);
}

// The figures belong to one build of the plugin, whatever its version says:
// the cache records the file's size, modification time and a fingerprint
// of its bytes. A new stamp over the same bytes (a reinstall) keeps them; new
// bytes (a rebuild without a version bump) are measured again.
TEST_F(CostModelTest, ARebuiltPluginIsMeasuredAgainAReinstalledOneIsNot) {
  std::string file;
  {
    auto costs = model();
    ASSERT_TRUE(costs.op("reference:0", relu(256)).ok());
    ASSERT_TRUE(costs.save().ok());
    file = costs.cache_file("reference:0");
  }
  auto edit_build = [&](const std::function<void(nlohmann::json&)>& change) {
    std::ifstream in(file);
    nlohmann::json cache = nlohmann::json::parse(in);
    in.close();
    change(cache.at("plugin_build"));
    std::ofstream(file) << cache.dump(1);
  };
  nlohmann::json recorded;
  edit_build([&](nlohmann::json& build) {
    recorded = build;
    EXPECT_EQ(build.at("file"), device_->backend().path.string());
    EXPECT_EQ(build.at("fnv1a64").get<std::string>().size(), 16u);
    build["mtime_ns"] = build.at("mtime_ns").get<int64_t>() - 1000;  // same bytes, another stamp
  });
  {
    auto costs = model();
    ASSERT_TRUE(costs.op("reference:0", relu(256)).ok());
    EXPECT_EQ(costs.calibrated(), 0u) << "the same bytes: the figures stand";
    ASSERT_TRUE(costs.save().ok());
  }
  edit_build([&](nlohmann::json& build) {
    EXPECT_EQ(build, recorded) << "the new stamp was written back";
    build["mtime_ns"] = build.at("mtime_ns").get<int64_t>() - 1000;
    build["fnv1a64"] = "0123456789abcdef";  // another build
  });
  auto costs = model();
  ASSERT_TRUE(costs.op("reference:0", relu(256)).ok());
  EXPECT_EQ(costs.calibrated(), 1u) << "another build: measured again";
}

TEST_F(CostModelTest, AnOpTheBackendDeclinesIsUnsupportedWithItsReason) {
  auto costs = model();
  host::exec::OpSpec spec = relu(8);
  spec.op = "tandem_test.no_such_op";
  auto c = costs.op("reference:0", spec);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE(c->supported);
  EXPECT_NE(c->why.find("no_such_op"), std::string::npos) << c->why;
  ASSERT_TRUE(costs.save().ok());
  auto reloaded = model();
  auto cached = reloaded.op("reference:0", spec);
  ASSERT_TRUE(cached.ok());
  EXPECT_FALSE(cached->supported);
  EXPECT_EQ(reloaded.calibrated(), 0u);
}

TEST_F(CostModelTest, ACorruptedCacheIsMeasuredAgainAndRewritten) {
  auto costs = model();
  const std::string file = costs.cache_file("reference:0");
  std::filesystem::create_directories(std::filesystem::path(file).parent_path());
  std::ofstream(file) << "{\"identity\": {\"format\": 1}, \"ops\": [tru";
  auto c = costs.op("reference:0", relu(64));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(costs.calibrated(), 1u);
  ASSERT_TRUE(costs.save().ok());
  std::ifstream in(file);
  EXPECT_TRUE(nlohmann::json::accept(in)) << "the cache was rewritten whole";
}

TEST_F(CostModelTest, ACopyCostsMoreTheMoreBytesItMoves) {
  const host::LoadedPlugin* onednn = registry_->find("onednn");
  if (onednn == nullptr)
    GTEST_SKIP() << "the onednn plugin is not part of this build (a second device is needed)";
  auto other = host::DeviceHandle::open(*onednn, 0);
  ASSERT_TRUE(other.ok()) << other.error().message;
  host::place::CostModel costs({{"reference:0", &*device_}, {"onednn:0", &*other}},
                               {dir_.file("cache"), "", true});
  auto small = costs.copy_micros("reference:0", "onednn:0", 1024);
  auto large = costs.copy_micros("reference:0", "onednn:0", size_t(64) << 20);
  ASSERT_TRUE(small.ok()) << small.error().message;
  ASSERT_TRUE(large.ok()) << large.error().message;
  EXPECT_GT(*small, 0.0);
  EXPECT_GT(*large, *small);
  EXPECT_EQ(device_->allocator().stats().allocated, 0u) << "calibration keeps no memory of the run's devices";
}

}  // namespace
}  // namespace tandem::test
