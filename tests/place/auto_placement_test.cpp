// Automatic placement on known costs: the cost cache of both devices is
// written by the test (the documented JSON a calibration writes), so the
// choices are deterministic: every layer on its fastest device, a layer
// that would be faster elsewhere stays with its neighbours when copies cost
// more than it gains, an op a device cannot run never goes there, a budget
// moves layers, and nothing fitting is reported as such.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "build_plugins.hpp"
#include "lowering/autodiff.hpp"
#include "lowering/model_graph.hpp"
#include "lowering/optimizer.hpp"
#include "model/model_parser.hpp"
#include "pinned_mlp.hpp"
#include "place/auto_placement.hpp"
#include "temp_dir.hpp"

namespace tandem::test {
namespace {

using host::place::AutoPlacement;
using host::place::CostModel;

// What an op costs on a device, by its layer; nullopt: the device cannot run it.
using CostOf = std::function<std::optional<double>(const std::string& device, const std::string& layer)>;

class AutoPlacementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.emplace(build_plugins(services_));
    for (const char* backend : {"onednn", "reference"}) {
      if (registry_->find(backend) == nullptr)
        GTEST_SKIP() << "the " << backend << " plugin is not part of this build";
      auto device = host::DeviceHandle::open(*registry_->find(backend), 0);
      ASSERT_TRUE(device.ok()) << device.error().message;
      handles_.push_back(std::make_unique<host::DeviceHandle>(std::move(*device)));
      devices_[handles_.back()->id()] = handles_.back().get();
    }
    std::string text = kPinnedMlp;  // without its pins: every layer is placed automatically
    for (const char* pin : {"device = \"reference\"\n", "device = \"reference:0\"\n"})
      text.erase(text.find(pin), std::string(pin).size());
    // fc2 24 wide: none of its ops has the shapes of another layer's, so a
    // cost written for fc2's ops is fc2's alone (the cache is keyed by op).
    const size_t fc2 = text.find("out_features = 16", text.find("name = \"fc2\""));
    text.replace(fc2, 17, "out_features = 24");
    load(text);
  }

  // The training graph of a model file's text, batch 4.
  void load(const std::string& text) {
    auto spec = host::model::parse_model_text(text, "auto.toml");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    spec_ = std::move(*spec);
    auto model = host::lowering::build_forward(spec_, 4, host::lowering::Mode::Train);
    ASSERT_TRUE(model.ok()) << model.error().message;
    ASSERT_TRUE(host::lowering::append_backward(*model).ok());
    ASSERT_TRUE(host::lowering::append_optimizer(*model, spec_.train).ok());
    model_ = std::move(*model);
  }

  // Calibrates once (for the files' identity), then rewrites every op's time
  // and the copy costs as given.
  void write_costs(const CostOf& cost, double copy_latency_us, double bytes_per_us) {
    {
      CostModel calibrated(devices_, {dir_.file("cache"), "test", true});
      for (const auto& [device, handle] : devices_) {
        for (size_t i = 0; i < model_.graph.node_count(); ++i)
          ASSERT_TRUE(
              calibrated.op(device, *host::exec::op_spec_of(model_.graph, *model_.graph.node_at(i))).ok());
        for (const auto& [other, unused] : devices_)
          if (other != device) {
            ASSERT_TRUE(calibrated.copy_micros(device, other, 64).ok());
          }
      }
      ASSERT_TRUE(calibrated.save().ok());
    }
    CostModel files(devices_, {dir_.file("cache"), "test", true});
    for (const auto& [device, handle] : devices_) {
      const std::string path = files.cache_file(device);
      nlohmann::json cache = nlohmann::json::parse(std::ifstream(path));
      for (size_t i = 0; i < model_.graph.node_count(); ++i) {
        const host::Node& n = *model_.graph.node_at(i);
        const std::string key = host::place::op_cost_key(*host::exec::op_spec_of(model_.graph, n));
        const auto t = cost(device, n.layer);
        cache["ops"][key]["supported"] = t.has_value();
        cache["ops"][key]["us"] = t.value_or(0.0);
        if (!t) cache["ops"][key]["why"] = "the test says so";
      }
      for (auto& [to, copy] : cache["copies"].items()) {
        copy["latency_us"] = copy_latency_us;
        copy["bytes_per_us"] = bytes_per_us;
      }
      std::ofstream(path) << cache.dump(1);
    }
  }

  host::Result<AutoPlacement> place(std::map<std::string, uint64_t> budgets = {}) {
    costs_.emplace(devices_, host::place::CostModelOptions{dir_.file("cache"), "test", true});
    host::place::AutoPlacementInputs in;
    in.placement.default_device = "onednn:0";
    in.candidates = {"onednn:0", "reference:0"};
    in.estimate.devices = devices_;
    in.estimate.default_device = "onednn:0";
    in.estimate.budgets = std::move(budgets);
    in.estimate.keep = {"loss", model_.graph.value(model_.logits)->name};
    in.estimate.costs = &*costs_;
    auto placed = host::place::place_automatically(model_.graph, spec_, in);
    if (placed) {
      EXPECT_EQ(costs_->calibrated(), 0u) << "every cost comes from the test's cache";
    }
    return placed;
  }

  // The same step on both devices, but reference:0 ten times slower.
  static std::optional<double> onednn_faster(const std::string& device, const std::string&) {
    return device == "onednn:0" ? 10.0 : 100.0;
  }

  host::HostServices services_;
  std::optional<host::PluginRegistry> registry_;
  std::vector<std::unique_ptr<host::DeviceHandle>> handles_;
  std::map<std::string, const host::DeviceHandle*> devices_;
  host::model::ModelSpec spec_;
  host::lowering::ModelGraph model_;
  std::optional<CostModel> costs_;
  TempDir dir_;
};

TEST_F(AutoPlacementTest, EveryLayerGoesToItsFastestDevice) {
  write_costs(onednn_faster, 5, 1000);
  auto placed = place();
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  EXPECT_TRUE(placed->fits);
  for (const char* layer : {"fc1", "fc2", "fc3"})
    EXPECT_EQ(placed->layer_devices.at(layer), "onednn:0") << layer;
  EXPECT_EQ(placed->estimate.copies, 0u);
  EXPECT_TRUE(placed->estimate.timed);
}

TEST_F(AutoPlacementTest, ALayerFasterElsewhereStaysWithItsNeighboursWhenCopiesCostMore) {
  // fc2 is a little faster on reference:0: worth two copies each way only when copies are cheap.
  const CostOf fc2_faster_on_reference = [](const std::string& device, const std::string& layer) {
    if (layer == "fc2") return std::optional<double>(device == "reference:0" ? 8.0 : 10.0);
    return onednn_faster(device, layer);
  };
  write_costs(fc2_faster_on_reference, 1000, 1000);
  auto dear = place();
  ASSERT_TRUE(dear.ok()) << dear.error().message;
  EXPECT_EQ(dear->layer_devices.at("fc2"), "onednn:0");
  write_costs(fc2_faster_on_reference, 0, 1e9);
  auto cheap = place();
  ASSERT_TRUE(cheap.ok()) << cheap.error().message;
  EXPECT_EQ(cheap->layer_devices.at("fc2"), "reference:0");

  EXPECT_EQ(cheap->layer_devices.at("fc1"), "onednn:0");
  EXPECT_GT(cheap->estimate.copies, 0u);
}

TEST_F(AutoPlacementTest, ALayerGoesWhereItsOpsCanRun) {
  write_costs(
      [](const std::string& device, const std::string& layer) -> std::optional<double> {
        if (layer == "fc3" && device == "onednn:0") return std::nullopt;
        return onednn_faster(device, layer);
      },
      5, 1000);
  auto placed = place();
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  EXPECT_EQ(placed->layer_devices.at("fc3"), "reference:0");
  EXPECT_EQ(placed->layer_devices.at("fc1"), "onednn:0");
}

TEST_F(AutoPlacementTest, ABudgetMovesLayersUntilEveryDeviceFits) {
  write_costs(onednn_faster, 5, 1000);
  auto free = place();
  ASSERT_TRUE(free.ok()) << free.error().message;
  const uint64_t whole = free->estimate.find("onednn:0")->memory.total;
  const uint64_t budget = whole * 3 / 4;
  auto placed = place({{"onednn:0", budget}});
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  EXPECT_TRUE(placed->fits);
  ASSERT_NE(placed->estimate.find("onednn:0"), nullptr);
  EXPECT_LE(placed->estimate.find("onednn:0")->memory.total, budget);
  EXPECT_GT(placed->estimate.step_us(), free->estimate.step_us()) << "fitting costs time here";
  size_t moved = 0;
  for (const auto& [layer, device] : placed->layer_devices) moved += device == "reference:0" ? 1 : 0;
  EXPECT_GE(moved, 1u);
}

TEST_F(AutoPlacementTest, NothingFitsIsReportedWithTheClosestPlacement) {
  write_costs(onednn_faster, 5, 1000);
  auto placed = place({{"onednn:0", 1024}, {"reference:0", 1024}});
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  EXPECT_FALSE(placed->fits);
  EXPECT_GT(placed->estimate.over(), 0u);
}

// Four pre-norm transformer blocks, AdamW.
const char* kFourBlocks = R"([model]
task = "language_model"
context = 16
vocab_size = 32
[[layers]]
name = "tokens"
op = "embedding"
num_embeddings = 32
embedding_dim = 32
[[layers]]
name = "positions"
op = "position_embedding"
[[layers]]
name = "h"
op = "repeat"
count = 4
  [[layers.body]]
  name = "ln1"
  op = "layer_norm"
  [[layers.body]]
  name = "attn"
  op = "attention"
  heads = 2
  [[layers.body]]
  name = "attn_residual"
  op = "add"
  inputs = ["h", "attn"]
  [[layers.body]]
  name = "ln2"
  op = "layer_norm"
  [[layers.body]]
  name = "fc"
  op = "linear"
  out_features = 128
  [[layers.body]]
  name = "gelu"
  op = "gelu"
  [[layers.body]]
  name = "proj"
  op = "linear"
  out_features = 32
  [[layers.body]]
  name = "mlp_residual"
  op = "add"
  inputs = ["attn_residual", "proj"]
[[layers]]
name = "head"
op = "linear"
out_features = 32
[train]
optimizer = "adamw"
)";

TEST_F(AutoPlacementTest, ATransformerTooLargeForItsDeviceIsCutWhereItFits) {
  // Residual blocks: a single layer moved out of a full device adds copy
  // buffers on both sides of it, often more than it frees, so moving one
  // layer at a time from the all-fast start takes many rounds (or stalls
  // over the budget). The model cut in two fits at once.
  load(kFourBlocks);
  // Per-op ratios like a GPU's against a CPU's: attention the cheapest to move.
  write_costs(
      [](const std::string& device, const std::string& layer) -> std::optional<double> {
        const bool fast = device == "onednn:0";
        const auto has = [&](const char* part) { return layer.find(part) != std::string::npos; };
        if (has("residual")) return fast ? 1.0 : 50.0;
        if (has(".attn")) return fast ? 40.0 : 1200.0;
        if (has(".fc") || has(".proj") || has("head")) return fast ? 50.0 : 15000.0;
        if (has(".ln")) return fast ? 2.0 : 100.0;
        return fast ? 3.0 : 150.0;
      },
      5, 1000);
  auto free = place();
  ASSERT_TRUE(free.ok()) << free.error().message;
  const uint64_t whole = free->estimate.find("onednn:0")->memory.total;
  for (const uint64_t budget : {whole * 3 / 4, whole / 2, whole / 4}) {
    auto placed = place({{"onednn:0", budget}});
    ASSERT_TRUE(placed.ok()) << placed.error().message;
    EXPECT_TRUE(placed->fits) << "budget " << budget << " of " << whole
                              << " bytes: " << placed->estimate.over() << " bytes over";
    // Each cut evaluated once, then a few rounds of single-layer moves. From
    // the all-fast start alone the search evaluated 400 to 1125 assignments
    // for these budgets.
    const size_t layers = spec_.layers.size();
    EXPECT_LE(placed->evaluated, 2 * (layers + 1) + 3 * layers) << "budget " << budget;
    ASSERT_NE(placed->estimate.find("onednn:0"), nullptr);
    EXPECT_LE(placed->estimate.find("onednn:0")->memory.total, budget);
  }
}

}  // namespace
}  // namespace tandem::test
