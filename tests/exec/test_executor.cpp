// The executor on the real reference backend: a small network's loss by
// hand, parameters shared between executors, an unsupported node, memory,
// and what one device answers to the questions of several.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <vector>

#include "device/device.hpp"
#include "exec/composed_executor.hpp"
#include "exec/device_executor.hpp"
#include "exec/executor.hpp"
#include "plugin/registry.hpp"
#include "reference_device.hpp"
#include "tiny_net.hpp"

namespace tandem::test {
namespace {

using host::Graph;
using host::NodeSpec;
using host::TensorType;
using host::ValueId;
using host::exec::Executor;
using host::exec::ExecutorOptions;

// The reference plugin from the build tree, device 0.
class ExecutorTest : public ReferenceDevice {};

const std::vector<float> kX = {1, 2, 3, -1, 0.5f, 2, 0, 0, 1, 2, -2, 0.25f};
const std::vector<float> kW = {0.1f, -0.2f, 0.3f, 0.5f, 0.4f, -0.1f};
const std::vector<float> kB = {0.05f, -0.1f};
const std::vector<int32_t> kLabels = {0, 1, 1, 0};

// The mean cross-entropy of relu(x wᵀ + b), in double.
double expected_loss() {
  double total = 0;
  for (int n = 0; n < 4; ++n) {
    double z[2];
    for (int o = 0; o < 2; ++o) {
      double s = kB[o];
      for (int i = 0; i < 3; ++i) s += double(kX[n * 3 + i]) * kW[o * 3 + i];
      z[o] = std::max(s, 0.0);
    }
    double lse = std::log(std::exp(z[0]) + std::exp(z[1]));
    total += lse - z[kLabels[n]];
  }
  return total / 4;
}

void write_inputs(Executor& e, const Net& n) {
  ASSERT_TRUE(e.write(n.x, kX.data(), kX.size() * 4).ok());
  ASSERT_TRUE(e.write(n.labels, kLabels.data(), kLabels.size() * 4).ok());
  ASSERT_TRUE(e.write(n.w, kW.data(), kW.size() * 4).ok());
  ASSERT_TRUE(e.write(n.b, kB.data(), kB.size() * 4).ok());
}

TEST_F(ExecutorTest, ComputesTheLossOfASmallNetwork) {
  Net n = make_net();
  auto e = Executor::create(*device_, n.graph, {});
  ASSERT_TRUE(e.ok()) << e.error().message;
  write_inputs(**e, n);
  auto ran = (*e)->run();
  ASSERT_TRUE(ran.ok()) << ran.error().message;
  float loss = 0;
  ASSERT_TRUE((*e)->read(n.loss, &loss, sizeof loss).ok());
  // f32 accumulation over 3 terms, then exp/log of O(1) values.
  EXPECT_NEAR(loss, expected_loss(), 1e-5);
  EXPECT_FALSE(std::isnan(loss));
  // A size mismatch is refused.
  EXPECT_FALSE((*e)->read(n.loss, &loss, 8).ok());
}

TEST_F(ExecutorTest, FillAndProfile) {
  Net n = make_net();
  ExecutorOptions options;
  options.profile = true;
  auto e = Executor::create(*device_, n.graph, options);
  ASSERT_TRUE(e.ok()) << e.error().message;
  write_inputs(**e, n);
  ASSERT_TRUE((*e)->fill(n.w, 1.5).ok());
  std::vector<float> w(6);
  ASSERT_TRUE((*e)->read(n.w, w.data(), 24).ok());
  for (float v : w) EXPECT_EQ(v, 1.5f);
  ASSERT_TRUE((*e)->run(0, 2).ok());
  ASSERT_TRUE((*e)->run(2, 3).ok());
  ASSERT_EQ((*e)->profile_events().size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ((*e)->profile_events()[i].node, i);
  EXPECT_GE((*e)->node_time_us()[0], 0.0);
  EXPECT_FALSE((*e)->run(2, 4).ok());
}

#ifdef TANDEM_BROKEN_GOOD_DIR
// A backend without a "fill" kernel (this one runs relu, relu_grad and
// copy): the state values training fills at its start are written by
// copies from host memory, in every dtype, larger than one copy chunk too.
TEST(ExecutorFill, ABackendWithoutAFillKernelIsFilledByCopies) {
  host::HostServices services;
  host::DiscoveryOptions options;
  options.plugin_paths = {TANDEM_BROKEN_GOOD_DIR};
  options.env_path = "";
  options.install_dir = std::filesystem::path();
  options.exe_relative_dir = std::filesystem::path();
  options.allow_insecure = true;
  host::PluginRegistry registry = host::PluginRegistry::discover(options, services);
  ASSERT_NE(registry.find("broken"), nullptr);
  auto device = host::DeviceHandle::open(*registry.find("broken"), 0);
  ASSERT_TRUE(device.ok()) << device.error().message;

  Graph g;
  const ValueId x = *g.add_value("x", TDM_VALUE_INPUT, {TDM_F32, {4}});
  NodeSpec act{"relu", "act", "act", TDM_PHASE_FORWARD, {}, {x}, {{TDM_F32, {4}}}, {"act"}};
  ASSERT_TRUE(g.insert_node(act).ok());
  const ValueId big = *g.add_value("state.big", TDM_VALUE_STATE, {TDM_F32, {600000}});  // 2.4 MB
  const ValueId half = *g.add_value("state.bf16", TDM_VALUE_STATE, {TDM_BF16, {5}});
  const ValueId step = *g.add_value("state.step", TDM_VALUE_STATE, {TDM_S32, {}});
  auto e = Executor::create(*device, g, ExecutorOptions{});
  ASSERT_TRUE(e.ok()) << e.error().message;

  ASSERT_TRUE((*e)->fill(big, 0.25).ok());
  std::vector<float> values(600000);
  ASSERT_TRUE((*e)->read(big, values.data(), values.size() * 4).ok());
  for (float v : values) ASSERT_EQ(v, 0.25f);
  ASSERT_TRUE((*e)->fill(half, -2.0).ok());
  std::vector<uint16_t> bf16(5);
  ASSERT_TRUE((*e)->read(half, bf16.data(), 10).ok());
  for (uint16_t v : bf16) EXPECT_EQ(v, 0xC000);  // -2 in bf16
  ASSERT_TRUE((*e)->fill(step, 7).ok());
  int32_t s = 0;
  ASSERT_TRUE((*e)->read(step, &s, 4).ok());
  EXPECT_EQ(s, 7);
}
#endif

TEST_F(ExecutorTest, SharesParametersThroughExternal) {
  Net train = make_net();
  Net eval = make_net();
  auto a = Executor::create(*device_, train.graph, {});
  ASSERT_TRUE(a.ok()) << a.error().message;
  ExecutorOptions options;
  options.external["fc.weight"] = (*a)->device_pointer(train.w);
  options.external["fc.bias"] = (*a)->device_pointer(train.b);
  auto b = Executor::create(*device_, eval.graph, options);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ((*b)->device_pointer(eval.w), (*a)->device_pointer(train.w));

  write_inputs(**a, train);
  std::vector<float> seen(6);
  ASSERT_TRUE((*b)->read(eval.w, seen.data(), 24).ok());
  EXPECT_EQ(seen, kW);
  // The eval executor computes the same loss from the shared parameters.
  ASSERT_TRUE((*b)->write(eval.x, kX.data(), 48).ok());
  ASSERT_TRUE((*b)->write(eval.labels, kLabels.data(), 16).ok());
  ASSERT_TRUE((*b)->run().ok());
  float loss = 0;
  ASSERT_TRUE((*b)->read(eval.loss, &loss, 4).ok());
  EXPECT_NEAR(loss, expected_loss(), 1e-5);
  // Only what it does not share is allocated by the eval executor.
  EXPECT_LT((*b)->allocated_bytes(), (*a)->allocated_bytes());

  ExecutorOptions bad;
  bad.external["fc"] = (*a)->device_pointer(train.w);  // an activation
  auto refused = Executor::create(*device_, eval.graph, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("'fc'"), std::string::npos) << refused.error().message;
}

TEST_F(ExecutorTest, UnsupportedNodeIsNamed) {
  Graph g;
  ValueId x = *g.add_value("x", TDM_VALUE_INPUT, {TDM_F32, {4}});
  NodeSpec spec{"no_such_op", "mystery", "odd_layer", TDM_PHASE_FORWARD, {}, {x}, {{TDM_F32, {4}}}, {}};
  ASSERT_TRUE(g.insert_node(spec).ok());
  auto e = Executor::create(*device_, g, {});
  ASSERT_FALSE(e.ok());
  const std::string& message = e.error().message;
  EXPECT_NE(message.find("backend reference"), std::string::npos) << message;
  EXPECT_NE(message.find("node 'mystery'"), std::string::npos) << message;
  EXPECT_NE(message.find("layer 'odd_layer'"), std::string::npos) << message;
  EXPECT_NE(message.find("no_such_op f32[4]"), std::string::npos) << message;
  EXPECT_EQ(e.error().status, TDM_UNSUPPORTED) << message;
}

TEST_F(ExecutorTest, MemoryEstimateAndMeasuredPeak) {
  Net n = make_net();
  auto e = Executor::create(*device_, n.graph, {});
  ASSERT_TRUE(e.ok()) << e.error().message;
  const auto& m = (*e)->plan().estimate;
  EXPECT_EQ(m.total, m.parameters + m.gradients + m.optimizer_state + m.other_state + m.inputs +
                         m.activations + m.workspace + m.allocator_rounding);
  // Each allocation is whole blocks of the allocator's granule.
  EXPECT_EQ(m.total % 512, 0u);
  EXPECT_EQ(m.parameters, 6u * 4 + 2 * 4);
  EXPECT_EQ(m.inputs, 12u * 4 + 4 * 4);
  EXPECT_EQ(m.activations, (*e)->plan().arena_bytes);
  EXPECT_GT((*e)->plan().arena_bytes, 0u);
  ASSERT_TRUE(device_->memory_stats().has_value()) << "reference provides memory_stats (ABI 1.1)";
  EXPECT_GE((*e)->measured_peak(), (*e)->plan().arena_bytes);
  EXPECT_GE((*e)->measured_peak(), (*e)->allocated_bytes());
  EXPECT_EQ((*e)->measured_peak(), m.total) << "the executor allocates exactly what it planned";
}

// launch_range is run() in pieces less the synchronisation, on the one
// stream a caller orders its own work with (the data-parallel all-reduce).
TEST_F(ExecutorTest, LaunchRangeRunsInPiecesOnTheComputeStream) {
  Net n = make_net();
  auto e = Executor::create(*device_, n.graph, {});
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_NE((*e)->compute_stream(), nullptr);
  write_inputs(**e, n);
  ASSERT_TRUE((*e)->launch_range(0, 2).ok());
  ASSERT_TRUE((*e)->launch_range(2, (*e)->node_count()).ok());
  float loss = 0;
  ASSERT_TRUE((*e)->read(n.loss, &loss, sizeof loss).ok());  // ordered after the launches
  EXPECT_NEAR(loss, expected_loss(), 1e-5);
  auto outside = (*e)->launch_range(2, (*e)->node_count() + 1);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message.find("outside the schedule"), std::string::npos)
      << outside.error().message;
}

TEST_F(ExecutorTest, OneDeviceHasNoPartsAndNoCopies) {
  Net n = make_net();
  auto e = Executor::create(*device_, n.graph, {});
  ASSERT_TRUE(e.ok()) << e.error().message;
  write_inputs(**e, n);
  ASSERT_TRUE((*e)->run().ok());
  EXPECT_TRUE((*e)->parts().empty());
  EXPECT_TRUE((*e)->transfers().empty());
  EXPECT_EQ((*e)->transfers_run(), 0u);
  EXPECT_EQ((*e)->transferred_bytes(), 0u);
  EXPECT_EQ((*e)->transfer_busy_us(), 0.0);
  EXPECT_EQ((*e)->hidden_transfer_fraction(), 0.0);
}

// One device has no copies to configure: the type says so (a run-time
// refusal while both kinds were one class).
template <class E>
concept HasTransferOptions = requires(E& e) {
  e.set_transfer_options(host::exec::TransferOptions{});
};
static_assert(!HasTransferOptions<Executor>);
static_assert(!HasTransferOptions<host::exec::DeviceExecutor>);
static_assert(HasTransferOptions<host::exec::ComposedExecutor>);

}  // namespace
}  // namespace tandem::test
