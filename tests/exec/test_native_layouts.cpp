// Native layouts (ABI 1.3) in the host: the rule that picks native values
// (on hand-built graphs with made-up backend answers), the planner's sizes
// and in-place pairs, a backend without kernel_layouts (all plain), and the
// Fashion-MNIST CNN on onednn when it is built: exactly the conv/relu/pool
// chain's interior native, one backward pass equal bit for bit to the
// all-plain run and close to reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "exec/executor.hpp"
#include "exec/native_layouts.hpp"
#include "exec/planner.hpp"
#include "exec/tensor_text.hpp"
#include "lowering/autodiff.hpp"
#include "lowering/model_graph.hpp"
#include "model/model_parser.hpp"
#include "plugin/optional_call.hpp"
#include "reference_device.hpp"

namespace tandem::test {
namespace {

using host::Graph;
using host::Node;
using host::NodeSpec;
using host::TensorType;
using host::ValueId;
using host::exec::decide_layouts;
using host::exec::LayoutPlan;
using host::exec::NodeLayouts;

TensorType f32(std::vector<int64_t> dims) {
  return TensorType{TDM_F32, std::move(dims)};
}

ValueId add_node(Graph& g, const std::string& op, const std::string& name, std::vector<ValueId> inputs,
                 std::vector<TensorType> outputs) {
  NodeSpec spec;
  spec.op = op;
  spec.name = name;
  spec.layer = name;
  spec.inputs = std::move(inputs);
  spec.outputs = std::move(outputs);
  auto id = g.insert_node(spec);
  EXPECT_TRUE(id.ok()) << id.error().message;
  return g.node(*id)->outputs.at(0);
}

// A backend that takes and gives native on every slot of conv/scale/pool
// (8 extra bytes of padding per native tensor), and nothing elsewhere.
NodeLayouts chain_backend(size_t, const Node& node) {
  NodeLayouts a;
  const bool chain = node.op == "conv2d" || node.op == "scale" || node.op == "max_pool2d";
  a.accepts.assign(node.inputs.size(), chain ? 1 : 0);
  a.offers.assign(node.outputs.size(), chain ? 1 : 0);
  a.native_bytes.assign(node.outputs.size(), 0);
  if (chain) a.native_bytes[0] = 4 * 2 * 16 * 4 * 4 + 8;
  return a;
}

struct Chain {
  Graph g;
  ValueId x, w, conv, scaled, pool, flat, loss;
};

// x -> conv -> scale -> pool -> reshape -> reduce: native fits conv..pool.
// (scale: an elementwise op the catalog lets run in place.)
Chain make_chain() {
  Chain c;
  c.x = *c.g.add_value("x", TDM_VALUE_INPUT, f32({2, 16, 4, 4}));
  c.w = *c.g.add_value("w", TDM_VALUE_PARAMETER, f32({16, 16, 3, 3}));
  c.conv = add_node(c.g, "conv2d", "conv", {c.x, c.w}, {f32({2, 16, 4, 4})});
  c.scaled = add_node(c.g, "scale", "scale", {c.conv}, {f32({2, 16, 4, 4})});
  c.pool = add_node(c.g, "max_pool2d", "pool", {c.scaled}, {f32({2, 16, 2, 2})});
  c.flat = add_node(c.g, "reshape", "flat", {c.pool}, {f32({2, 64})});
  c.loss = add_node(c.g, "reduce_sum", "sum", {c.flat}, {f32({})});
  return c;
}

TEST(NativeLayouts, ProducerOffersAndEveryConsumerAccepts) {
  Chain c = make_chain();
  const LayoutPlan plan = decide_layouts(c.g, {c.loss}, chain_backend);
  EXPECT_TRUE(plan.is_native(c.conv));
  EXPECT_TRUE(plan.is_native(c.scaled));
  EXPECT_FALSE(plan.is_native(c.pool));  // read by reshape, which declines: the chain's edge
  EXPECT_FALSE(plan.is_native(c.x));     // a graph input: the host writes it
  EXPECT_FALSE(plan.is_native(c.w));     // a parameter: checkpoints and the optimizer read it
  EXPECT_EQ(plan.native.size(), 2u);
  EXPECT_EQ(plan.native.at(c.conv), 4u * 2 * 16 * 4 * 4 + 8);
  // conv's description: x plain, w plain, y native.
  EXPECT_EQ(plan.node_layouts(*c.g.node_at(0)), (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_TRUE(plan.node_layouts(*c.g.node_at(4)).empty());  // nothing native: NULL on the wire
}

TEST(NativeLayouts, HostReadValuesAndMixedConsumersStayPlain) {
  Chain c = make_chain();
  // A value the host reads after the run stays plain.
  EXPECT_FALSE(decide_layouts(c.g, {c.loss, c.scaled}, chain_backend).is_native(c.scaled));
  // A second reader that declines makes the value plain for every reader.
  add_node(c.g, "reshape", "peek", {c.conv}, {f32({2, 256})});
  const LayoutPlan plan = decide_layouts(c.g, {c.loss}, chain_backend);
  EXPECT_FALSE(plan.is_native(c.conv));
  EXPECT_TRUE(plan.is_native(c.scaled));
  // No answers at all: nothing native.
  EXPECT_TRUE(decide_layouts(c.g, {}, [](size_t, const Node&) { return NodeLayouts{}; }).native.empty());
}

TEST(NativeLayouts, PlannerSizesNativeSlotsAndKeepsInPlacePairsInOneLayout) {
  Chain c = make_chain();
  // scale may overwrite its input (the catalog allows it; a pass asks for it).
  ASSERT_TRUE(c.g.annotate(c.g.value(c.scaled)->producer, "tandem.inplace", std::string("0:0")).ok());
  const LayoutPlan layouts = decide_layouts(c.g, {c.loss}, chain_backend);
  auto plan = host::exec::make_plan(c.g, {}, {c.loss}, layouts.native);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const auto* conv = plan->find(c.conv);
  EXPECT_TRUE(conv->native);
  EXPECT_EQ(conv->bytes, 2u * 16 * 4 * 4 * 4);  // what the host would read: the plain size
  EXPECT_EQ(conv->arena_bytes(), conv->bytes + 8);
  // scale may run in place on conv's bytes: both native.
  EXPECT_EQ(plan->find(c.scaled)->owner, c.conv);
  // Plain everywhere, the arena is smaller by the padding.
  auto plain = host::exec::make_plan(c.g, {}, {c.loss});
  ASSERT_TRUE(plain.ok());
  EXPECT_LT(plain->arena_bytes, plan->arena_bytes);
  // A native scale output over a plain input never shares its bytes.
  std::map<ValueId, uint64_t> only_scaled{{c.scaled, layouts.native.at(c.scaled)}};
  auto mixed = host::exec::make_plan(c.g, {}, {c.loss}, only_scaled);
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->find(c.scaled)->owner, c.scaled);
}

// Reference has no kernel_layouts (its table leaves it NULL, as an ABI 1.2
// plugin's is too short to have it): everything plain, nothing asked.
class NativeLayoutsReference : public ReferenceDevice {};

TEST_F(NativeLayoutsReference, ABackendWithoutTheFunctionGetsAllPlain) {
  EXPECT_EQ(TANDEM_OPTIONAL_FN(device_->backend(), backend, tdm_backend_api, kernel_layouts, 3), nullptr);
  Chain c = make_chain();
  EXPECT_TRUE(decide_layouts(*device_, c.g, {c.loss}).native.empty());
}

#ifdef TANDEM_HAVE_ONEDNN

class NativeLayoutsCnn : public ReferenceDevice {
 protected:
  void SetUp() override {
    ReferenceDevice::SetUp();
    const host::LoadedPlugin* onednn = registry_->find("onednn");
    ASSERT_NE(onednn, nullptr) << "onednn plugin not found in " << TANDEM_BUILD_PLUGIN_DIR;
    auto device = host::DeviceHandle::open(*onednn, 0);
    ASSERT_TRUE(device.ok()) << device.error().message;
    onednn_.emplace(std::move(device.value()));
    auto spec = host::model::parse_model_file(TANDEM_SOURCE_DIR "/bench/models/cnn.toml");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    auto built = host::lowering::build_forward(*spec, 8, host::lowering::Mode::Train);
    ASSERT_TRUE(built.ok()) << built.error().message;
    model_.emplace(std::move(built.value()));
    auto backward = host::lowering::append_backward(*model_);
    ASSERT_TRUE(backward.ok()) << backward.error().message;
  }
  void TearDown() override {
    onednn_.reset();
    ReferenceDevice::TearDown();
  }

  // Writes the same seeded values into every graph input and parameter.
  void write_inputs(host::exec::Executor& ex) {
    const Graph& g = model_->graph;
    std::mt19937 rng(42);
    for (size_t i = 0; i < g.value_count(); ++i) {
      const host::Value& v = *g.value_at(i);
      if (v.producer != host::kNoNode) continue;
      int64_t n = 1;
      for (int64_t d : v.type.dims) n *= d;
      if (v.type.dtype == TDM_S32) {
        std::vector<int32_t> labels(static_cast<size_t>(n));
        for (int32_t& l : labels) l = int32_t(rng() % 10);
        ASSERT_TRUE(ex.write(v.id, labels.data(), labels.size() * 4).ok()) << v.name;
        continue;
      }
      ASSERT_EQ(v.type.dtype, TDM_F32) << v.name;
      // Fan-in scaled weights keep activations O(1) through both convs.
      const double fan_in = v.type.dims.size() == 4 ? double(v.type.dims[1] * v.type.dims[2] * v.type.dims[3])
                            : v.type.dims.size() == 2 && v.kind == TDM_VALUE_PARAMETER
                                ? double(v.type.dims[1])
                                : 1.0;
      std::uniform_real_distribution<float> u(-1.f, 1.f);
      std::vector<float> data(static_cast<size_t>(n));
      for (float& x : data) x = float(u(rng) / std::sqrt(fan_in));
      ASSERT_TRUE(ex.write(v.id, data.data(), data.size() * 4).ok()) << v.name;
    }
  }

  struct Result {
    float loss = 0;
    std::vector<std::vector<float>> grads;  // per parameter, in model order
  };
  Result run(const host::DeviceHandle& device, host::exec::ExecutorOptions options,
             std::unique_ptr<host::exec::Executor>* keep = nullptr) {
    Result r;
    auto ex = host::exec::Executor::create(device, model_->graph, options);
    EXPECT_TRUE(ex.ok()) << ex.error().message;
    if (!ex.ok()) return r;
    write_inputs(**ex);
    auto ran = (*ex)->run();
    EXPECT_TRUE(ran.ok()) << ran.error().message;
    EXPECT_TRUE((*ex)->read(model_->loss, &r.loss, 4).ok());
    for (ValueId p : model_->parameters) {
      const ValueId grad = model_->gradients.at(p);
      std::vector<float> data(host::exec::tensor_bytes(model_->graph.value(grad)->type) / 4);
      EXPECT_TRUE((*ex)->read(grad, data.data(), data.size() * 4).ok());
      r.grads.push_back(std::move(data));
    }
    if (keep != nullptr) *keep = std::move(*ex);
    return r;
  }

  std::optional<host::DeviceHandle> onednn_;
  std::optional<host::lowering::ModelGraph> model_;
};

TEST_F(NativeLayoutsCnn, ExactlyTheChainInteriorIsNative) {
  host::exec::ExecutorOptions options;
  options.outputs = {"loss"};
  std::unique_ptr<host::exec::Executor> ex;
  run(*onednn_, options, &ex);
  ASSERT_NE(ex, nullptr);
  const Graph& g = model_->graph;
  std::set<std::string> native, expected;
  for (const auto& [id, storage] : ex->plan().values)
    if (storage.native) native.insert(g.value(id)->name);
  // Forward: the outputs of conv1, relu1, pool1, conv2, relu2 (pool2 feeds
  // the flatten: the edge). Backward: the gradients of those same values,
  // written by relu1_grad, pool1_grad, conv2_grad_input, relu2_grad and
  // pool2_grad (whose dy comes from the flatten's gradient: plain).
  std::set<std::string> chain_ops = {"conv2d",    "relu",           "max_pool2d", "conv2d_grad_input",
                                     "relu_grad", "max_pool2d_grad"};
  for (size_t i = 0; i < g.node_count(); ++i) {
    const Node& node = *g.node_at(i);
    const ValueId out = node.outputs[0];
    if (chain_ops.count(node.op) == 0 || g.value(out)->type.dims.size() != 4) continue;  // not fc1's relu
    bool feeds_reshape = false;
    for (host::NodeId consumer : g.consumers(out)) feeds_reshape |= g.node(consumer)->op == "reshape";
    if (!feeds_reshape) expected.insert(g.value(out)->name);
  }
  // bench/models/cnn.toml has 32 and 64 channels: multiples of the native
  // block on AVX2 (8) and AVX-512 (16) alike.
  ASSERT_EQ(native.size(), 10u) << "the onednn plugin offered no native layout on this CPU";
  EXPECT_EQ(native, expected);
  // The host never sees native bytes.
  const ValueId some_native = g.value_by_name(*native.begin())->id;
  std::vector<char> buffer(ex->plan().find(some_native)->bytes);
  auto read = ex->read(some_native, buffer.data(), buffer.size());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find("native layout"), std::string::npos) << read.error().message;
}

TEST_F(NativeLayoutsCnn, BackwardMatchesAllPlainBitForBitAndReferenceClosely) {
  host::exec::ExecutorOptions native_options;
  native_options.outputs = {"loss"};
  // Listing every activation as an output makes every value host-visible,
  // so plain: the ABI 1.2 behaviour, same plugin, same primitives.
  host::exec::ExecutorOptions plain_options;
  for (size_t i = 0; i < model_->graph.value_count(); ++i)
    if (model_->graph.value_at(i)->producer != host::kNoNode)
      plain_options.outputs.push_back(model_->graph.value_at(i)->name);
  const Result native = run(*onednn_, native_options);
  const Result plain = run(*onednn_, plain_options);
  const Result reference = run(*device_, native_options);
  ASSERT_EQ(native.grads.size(), model_->parameters.size());
  ASSERT_EQ(plain.grads.size(), native.grads.size());
  ASSERT_EQ(reference.grads.size(), native.grads.size());
  EXPECT_EQ(std::memcmp(&native.loss, &plain.loss, 4), 0) << native.loss << " vs " << plain.loss;
  // Against reference: the kit's metric |got - want| / max(1, |want|). Its
  // per-op f32 bound for accumulating ops is 2e-6 + 1e-6 sqrt(k); conv2's
  // weight gradient sums k = 8*14*14 terms (4e-5), and two conv layers,
  // two pools and the linear layers compound it: 1e-4 for the whole pass.
  EXPECT_LE(std::fabs(native.loss - reference.loss), 1e-4 * std::max(1.f, std::fabs(reference.loss)));
  for (size_t p = 0; p < native.grads.size(); ++p) {
    const std::string name = model_->graph.value(model_->parameters[p])->name;
    ASSERT_EQ(native.grads[p].size(), plain.grads[p].size());
    EXPECT_EQ(std::memcmp(native.grads[p].data(), plain.grads[p].data(), native.grads[p].size() * 4), 0)
        << name << ": native and plain layouts differ";
    double worst = 0;
    for (size_t i = 0; i < native.grads[p].size(); ++i) {
      const double want = reference.grads[p][i], got = native.grads[p][i];
      worst = std::max(worst, std::fabs(got - want) / std::max(1.0, std::fabs(want)));
    }
    EXPECT_LE(worst, 1e-4) << name;
  }
}

#endif  // TANDEM_HAVE_ONEDNN

}  // namespace
}  // namespace tandem::test
