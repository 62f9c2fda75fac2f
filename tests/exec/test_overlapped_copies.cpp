// A graph placed on reference:0 and onednn:0 (fc1 and fc3 pinned to
// reference, fc2 on onednn): the composed executor's overlapped copies give
// the bytes of a strictly sequential run, bit for bit, over several training
// steps — with the copy thread (both CPU devices host-addressable) and with
// the copy-stream routes a GPU takes (TransferOptions::as_device drives the
// CPU backends through them, stage_as_pinned through the staging a GPU with
// pinned memory takes) — and each copy is issued right after the node
// that produces its source, not right before its consumer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "build_plugins.hpp"
#include "device/device.hpp"
#include "exec/composed_executor.hpp"
#include "exec/tensor_text.hpp"
#include "lowering/autodiff.hpp"
#include "lowering/model_graph.hpp"
#include "lowering/optimizer.hpp"
#include "model/model_parser.hpp"
#include "pinned_mlp.hpp"
#include "place/placed_executor.hpp"
#include "place/placement.hpp"
#include "plugin/registry.hpp"

namespace tandem::test {
namespace {

using host::ValueId;
using host::exec::ComposedExecutor;
using host::exec::Executor;
using host::exec::TransferOptions;

const char* const kModel = kPinnedMlp;

constexpr int64_t kBatch = 4;

class OverlappedCopies : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.emplace(build_plugins(services_));
    for (const char* needed : {"onednn", "reference"})
      if (registry_->find(needed) == nullptr)
        GTEST_SKIP() << "the " << needed << " plugin is not part of this build";
    for (const char* backend : {"reference", "onednn"}) {
      auto device = host::DeviceHandle::open(*registry_->find(backend), 0);
      ASSERT_TRUE(device.ok()) << device.error().message;
      devices_.push_back(std::make_unique<host::DeviceHandle>(std::move(*device)));
    }
    auto spec = host::model::parse_model_text(kModel, "pins.toml");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    auto model = host::lowering::build_forward(*spec, kBatch, host::lowering::Mode::Train);
    ASSERT_TRUE(model.ok()) << model.error().message;
    ASSERT_TRUE(host::lowering::append_backward(*model).ok());
    ASSERT_TRUE(host::lowering::append_optimizer(*model, spec->train).ok());
    host::place::PlacementOptions o;
    o.default_device = "onednn:0";
    o.resolve = [](const std::string& pin) -> host::Result<std::string> {
      return pin.rfind("reference", 0) == 0 ? std::string("reference:0") : std::string("onednn:0");
    };
    auto placement = host::place::place_layers(model->graph, *spec, o);
    ASSERT_TRUE(placement.ok()) << placement.error().message;
    model_.emplace(std::move(*model));
    placement_.emplace(std::move(*placement));
  }

  std::unique_ptr<ComposedExecutor> make(const TransferOptions& transfer) {
    std::map<std::string, const host::DeviceHandle*> devices;
    for (const auto& d : devices_) devices[d->id()] = d.get();
    host::exec::ExecutorOptions options;
    options.outputs = {"loss"};
    auto e = host::place::make_placed_executor(devices, model_->graph, *placement_, options, {});
    EXPECT_TRUE(e.ok()) << e.error().message;
    if (!e.ok()) return nullptr;
    EXPECT_TRUE((*e)->set_transfer_options(transfer).ok());
    return std::move(*e);
  }

  size_t bytes_of(ValueId v) const {
    size_t n = host::exec::dtype_size(model_->graph.value(v)->type.dtype);
    for (int64_t d : model_->graph.value(v)->type.dims) n *= static_cast<size_t>(d);
    return n;
  }

  // Parameters from a fixed pattern, every other value without a producer
  // (momentum, gradients) zero, as a trainer's initialisation would.
  void initialise(Executor& e) const {
    const host::Graph& g = model_->graph;
    for (size_t i = 0; i < g.value_count(); ++i) {
      const host::Value& v = *g.value_at(i);
      if (v.producer != host::kNoNode || v.kind == TDM_VALUE_INPUT) continue;
      std::vector<unsigned char> bytes(bytes_of(v.id), 0);
      if (v.kind == TDM_VALUE_PARAMETER) {
        std::vector<float> w(bytes.size() / sizeof(float));
        for (size_t k = 0; k < w.size(); ++k) w[k] = 0.01f * static_cast<float>((k * 7 + i * 3) % 23) - 0.1f;
        std::memcpy(bytes.data(), w.data(), bytes.size());
      }
      if (e.device_pointer(v.id) == nullptr) continue;  // held by no part (unused)
      ASSERT_TRUE(e.write(v.id, bytes.data(), bytes.size()).ok()) << v.name;
    }
  }

  // `steps` momentum steps on batches of a fixed pattern, each run as two
  // ranges (so copies issued at a range's start are exercised too); the
  // loss of each step and every parameter's bytes at the end.
  std::vector<float> train(Executor& e, int steps) const {
    std::vector<float> seen;
    for (int s = 0; s < steps; ++s) {
      std::vector<float> x(static_cast<size_t>(kBatch * 8));
      for (size_t k = 0; k < x.size(); ++k)
        x[k] = 0.1f * static_cast<float>((k * 5 + static_cast<size_t>(s)) % 11) - 0.5f;
      std::vector<int32_t> labels = {0, 1, 2, 3};
      std::rotate(labels.begin(), labels.begin() + s % 4, labels.end());
      const float lr = 0.05f;
      EXPECT_TRUE(e.write(model_->input, x.data(), x.size() * sizeof(float)).ok());
      EXPECT_TRUE(e.write(model_->labels, labels.data(), labels.size() * sizeof(int32_t)).ok());
      EXPECT_TRUE(e.write(model_->lr, &lr, sizeof lr).ok());
      const size_t half = e.node_count() / 2;
      auto r = e.run(0, half);
      EXPECT_TRUE(r.ok()) << r.error().message;
      r = e.run(half, e.node_count());
      EXPECT_TRUE(r.ok()) << r.error().message;
      float loss = 0;
      EXPECT_TRUE(e.read(model_->loss, &loss, sizeof loss).ok());
      seen.push_back(loss);
    }
    for (ValueId p : model_->parameters) {
      std::vector<float> w(bytes_of(p) / sizeof(float));
      EXPECT_TRUE(e.read(p, w.data(), bytes_of(p)).ok());
      seen.insert(seen.end(), w.begin(), w.end());
    }
    return seen;
  }

  host::HostServices services_;
  std::optional<host::PluginRegistry> registry_;
  std::vector<std::unique_ptr<host::DeviceHandle>> devices_;
  std::optional<host::lowering::ModelGraph> model_;
  std::optional<host::place::Placement> placement_;
};

TEST_F(OverlappedCopies, GiveTheBytesOfASequentialRunOnEveryRoute) {
  TransferOptions sequential;
  sequential.sequential = true;
  auto reference = make(sequential);
  ASSERT_NE(reference, nullptr);
  initialise(*reference);
  const std::vector<float> expected = train(*reference, 4);
  // In order, no copy time is hidden.
  EXPECT_GT(reference->transfer_busy_us(), 0.0);
  EXPECT_EQ(reference->hidden_transfer_fraction(), 0.0);

  struct Route {
    std::string what;
    std::set<std::string> as_device;
    bool staged;
  };
  const std::vector<Route> routes = {
      {"memcpy on the copy thread", {}, false},
      {"reference:0 as a device (device to host, host to device)", {"reference:0"}, false},
      {"reference:0 as a GPU with pinned memory (both through staging on the copy thread)",
       {"reference:0"},
       true},
      {"both as devices (device to device through staging)", {"reference:0", "onednn:0"}, false},
  };
  for (const auto& [what, as_device, staged] : routes) {
    SCOPED_TRACE(what);
    TransferOptions overlapped;
    overlapped.as_device = as_device;
    overlapped.stage_as_pinned = staged;
    auto e = make(overlapped);
    ASSERT_NE(e, nullptr);
    initialise(*e);
    const std::vector<float> got = train(*e, 4);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
    EXPECT_EQ(e->transfers_run(), reference->transfers_run());
    EXPECT_GT(e->transfer_busy_us(), 0.0);
    EXPECT_GE(e->hidden_transfer_fraction(), 0.0);
    EXPECT_LE(e->hidden_transfer_fraction(), 1.0);
  }
}

TEST_F(OverlappedCopies, RoutesFollowWhatEachDeviceIsDrivenAs) {
  auto e = make({});
  ASSERT_NE(e, nullptr);
  for (const auto& t : e->transfers()) EXPECT_EQ(t.route, host::exec::CopyRoute::HostMemcpy);
  TransferOptions o;
  o.as_device = {"reference:0"};
  ASSERT_TRUE(e->set_transfer_options(o).ok());
  for (const auto& t : e->transfers()) {
    const bool from_reference = e->parts()[t.from_part].device == "reference:0";
    EXPECT_EQ(t.route,
              from_reference ? host::exec::CopyRoute::DeviceToHost : host::exec::CopyRoute::HostToDevice);
  }
}

TEST_F(OverlappedCopies, EachCopyIsIssuedRightAfterItsProducerAndWaitedForByItsFirstReader) {
  auto e = make({});
  ASSERT_NE(e, nullptr);
  const host::Graph& g = model_->graph;
  ASSERT_FALSE(e->transfers().empty());
  size_t earlier_than_before = 0;
  for (const auto& t : e->transfers()) {
    const auto& points = t.points;
    EXPECT_FALSE(points.in_order);
    // The global value copied: the node at the copy's slot reads it.
    const host::Node& copy = *g.node_at(t.position);
    ASSERT_EQ(copy.op, host::ops::kDeviceCopy);
    const host::Value& source = *g.value(copy.inputs[0]);
    SCOPED_TRACE(source.name);
    if (source.producer == host::kNoNode) {
      // A parameter or a value the host writes: at the start of the range.
      EXPECT_EQ(points.issue_after, host::exec::kNoPosition);
    } else {
      ASSERT_NE(points.issue_after, host::exec::kNoPosition);
      EXPECT_EQ(g.node_at(points.issue_after)->id, source.producer);
    }
    if (points.issue_after == host::exec::kNoPosition || points.issue_after + 1 < t.position)
      ++earlier_than_before;
    // The destination's first reader: the first node after the copy on the
    // destination device that reads the copied value.
    ASSERT_NE(points.destination_at, host::exec::kNoPosition);
    EXPECT_GT(points.destination_at, t.position);
    const host::Node& reader = *g.node_at(points.destination_at);
    EXPECT_EQ(reader.device, e->parts()[t.to_part].device);
    EXPECT_NE(std::find(reader.inputs.begin(), reader.inputs.end(), copy.outputs[0]), reader.inputs.end());
    for (size_t p = t.position + 1; p < points.destination_at; ++p) {
      const host::Node& n = *g.node_at(p);
      EXPECT_EQ(std::find(n.inputs.begin(), n.inputs.end(), copy.outputs[0]), n.inputs.end()) << n.name;
    }
  }
  // The learning rate (written by the host, read by the updates at the end)
  // at least starts long before the slot placement gave it.
  EXPECT_GT(earlier_than_before, 0u);
}

}  // namespace
}  // namespace tandem::test
