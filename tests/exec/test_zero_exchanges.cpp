// ZeRO's exchanges that run while later nodes compute (a zero.wait follows
// them): the executor's two routes, a host thread and a communication stream
// ordered by events, give what the exchanges in place give, pad uneven
// shards in the one exchange buffer the plan counts, and report a failed
// exchange at its wait. The ranks are simulated: this process is rank 1 of 4.
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "exec/collectives.hpp"
#include "exec/executor.hpp"
#include "ops/op_table.hpp"
#include "reference_device.hpp"

namespace tandem::test {
namespace {

using host::Graph;
using host::NodeSpec;
using host::Result;
using host::TensorType;
using host::ValueId;
using host::exec::Executor;
using host::exec::ExecutorOptions;

// Every rank sent what this one did (so a mean is its own block), and rank
// r's shard of a gather is this one's plus 100 r.
class SimulatedRanks final : public host::exec::Collectives {
 public:
  int rank() const override { return 1; }
  int world() const override { return 4; }
  Result<void> all_reduce_sum(void* buffer, size_t count, tdm_dtype, void*) override {
    called();
    for (size_t i = 0; i < count; ++i) static_cast<float*>(buffer)[i] *= 4;
    return {};
  }
  Result<void> all_gather(const void* send, void* receive, size_t count, tdm_dtype, void*) override {
    called();
    for (int r = 0; r < world(); ++r)
      for (size_t i = 0; i < count; ++i)
        static_cast<float*>(receive)[r * count + i] = static_cast<const float*>(send)[i] + 100.0f * r;
    return {};
  }
  Result<void> reduce_scatter_mean(const void* send, void* receive, size_t count, tdm_dtype, void*) override {
    called();
    if (fail) return host::make_error("the peers went away", TDM_INTERNAL);
    for (size_t i = 0; i < count; ++i)
      static_cast<float*>(receive)[i] = static_cast<const float*>(send)[rank() * count + i];
    return {};
  }
  std::set<std::thread::id> threads() {
    std::lock_guard<std::mutex> lock(mutex_);
    return threads_;
  }
  void forget_threads() {
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.clear();
  }
  bool fail = false;

 private:
  void called() {
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.insert(std::this_thread::get_id());
  }
  std::mutex mutex_;
  std::set<std::thread::id> threads_;
};

// x [10] is reduce-scattered into this rank's shard of 3 (the whole padded
// to 12) while relu(x) runs; the parameter's shard p [3] is gathered into
// its whole [10] meanwhile too; out = gathered + relu(x).
struct ExchangeGraph {
  Graph graph;
  ValueId x = host::kNoValue, p = host::kNoValue, shard = host::kNoValue, out = host::kNoValue;
};

ExchangeGraph make_graph(bool overlapped) {
  ExchangeGraph n;
  Graph& g = n.graph;
  const TensorType whole{TDM_F32, {10}}, part{TDM_F32, {3}};
  n.x = *g.add_value("x", TDM_VALUE_INPUT, whole);
  n.p = *g.add_value("p", TDM_VALUE_PARAMETER, part);
  auto add = [&](const char* op, const char* name, std::vector<ValueId> in, TensorType type) {
    auto id =
        g.insert_node(NodeSpec{op, name, "layer", TDM_PHASE_FORWARD, {}, std::move(in), {type}, {name}});
    EXPECT_TRUE(id.ok()) << id.error().message;
    return g.node(*id)->outputs[0];
  };
  ValueId scattered = add(host::ops::kZeroReduceScatter, "scattered", {n.x}, part);
  ValueId gathered = add(host::ops::kZeroAllGather, "gathered", {n.p}, whole);
  const ValueId r = add("relu", "r", {n.x}, whole);
  if (overlapped) {
    scattered = add(host::ops::kZeroWait, "scattered.wait", {scattered, n.x}, part);
    gathered = add(host::ops::kZeroWait, "gathered.wait", {gathered, n.p}, whole);
  }
  n.shard = scattered;
  n.out = add("add", "out", {gathered, r}, whole);
  return n;
}

class ZeroExchanges : public ReferenceDevice {
 protected:
  struct Outcome {
    std::vector<float> shard = std::vector<float>(3), out = std::vector<float>(10);
  };
  Outcome run(bool overlapped, bool on_streams) {
    ExchangeGraph n = make_graph(overlapped);
    ExecutorOptions options;
    options.data_collectives = &ranks_;
    options.exchanges_on_streams = on_streams;
    options.outputs = {n.graph.value(n.shard)->name, "out"};
    auto e = Executor::create(*device_, n.graph, options);
    Outcome o;
    EXPECT_TRUE(e.ok()) << e.error().message;
    if (!e.ok()) return o;
    const std::vector<float> x = {-1, 2, -3, 4, 5, -6, 7, 8, -9, 10}, p = {0.5f, 1.5f, 2.5f};
    EXPECT_TRUE((*e)->write(n.x, x.data(), 40).ok());
    EXPECT_TRUE((*e)->write(n.p, p.data(), 12).ok());
    auto ran = (*e)->run();
    EXPECT_TRUE(ran.ok()) << ran.error().message;
    EXPECT_TRUE((*e)->read(n.shard, o.shard.data(), 12).ok());
    EXPECT_TRUE((*e)->read(n.out, o.out.data(), 40).ok());
    buffers_ = (*e)->plan().estimate.buffers;
    workspace_ = (*e)->plan().estimate.workspace;
    return o;
  }
  SimulatedRanks ranks_;
  uint64_t buffers_ = 0, workspace_ = 0;
};

TEST_F(ZeroExchanges, InFlightOnAThreadTheyGiveWhatTheyGiveInPlace) {
  const Outcome in_place = run(false, false);
  EXPECT_EQ(in_place.shard, (std::vector<float>{4, 5, -6}));  // rank 1's elements [3, 6)
  const std::vector<float> expected = {0.5f,   3.5f,   2.5f,   104.5f, 106.5f,
                                       102.5f, 207.5f, 209.5f, 202.5f, 310.5f};
  EXPECT_EQ(in_place.out, expected);
  EXPECT_EQ(ranks_.threads(), std::set<std::thread::id>{std::this_thread::get_id()});
  EXPECT_EQ(buffers_, 0u);
  EXPECT_EQ(workspace_, 48u) << "in place, the padded copy of 4 shards of 3 is the node's workspace";

  ranks_.forget_threads();
  const Outcome overlapped = run(true, false);
  EXPECT_EQ(overlapped.shard, in_place.shard);
  EXPECT_EQ(overlapped.out, in_place.out);
  const std::set<std::thread::id> threads = ranks_.threads();
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u) << "the exchanges ran on the executor's thread";
  EXPECT_EQ(buffers_, 48u) << "the padded copy moves to the exchange buffer, which the plan counts";
  EXPECT_EQ(workspace_, 0u);
}

TEST_F(ZeroExchanges, OnACommunicationStreamOrderedByEventsTheyGiveWhatTheyGiveInPlace) {
  const Outcome in_place = run(false, false);
  const Outcome on_streams = run(true, true);
  EXPECT_EQ(on_streams.shard, in_place.shard);
  EXPECT_EQ(on_streams.out, in_place.out);
  EXPECT_EQ(buffers_, 48u);
}

TEST_F(ZeroExchanges, AFailedExchangeIsReportedWithItsNode) {
  ranks_.fail = true;
  for (bool on_streams : {false, true}) {
    ExchangeGraph n = make_graph(true);
    ExecutorOptions options;
    options.data_collectives = &ranks_;
    options.exchanges_on_streams = on_streams;
    auto e = Executor::create(*device_, n.graph, options);
    ASSERT_TRUE(e.ok()) << e.error().message;
    auto ran = (*e)->run();
    ASSERT_FALSE(ran.ok());
    EXPECT_NE(ran.error().message.find("the peers went away"), std::string::npos) << ran.error().message;
    EXPECT_NE(ran.error().message.find("scattered"), std::string::npos) << ran.error().message;
  }
}

}  // namespace
}  // namespace tandem::test
