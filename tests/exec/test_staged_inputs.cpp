// Next-batch staging on the reference backend: staging batch k+1 while
// batch k runs gives the outputs of writing each batch synchronously; only
// inputs can be staged; the plan's estimate counts the second buffer, and
// stays equal to what the executor allocates.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "exec/executor.hpp"
#include "reference_device.hpp"
#include "tiny_net.hpp"

namespace tandem::test {
namespace {

using host::Graph;
using host::NodeSpec;
using host::ValueId;
using host::exec::Executor;

class StagedInputs : public ReferenceDevice {};

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

Batch batch(int k) {
  Batch b{std::vector<float>(12), {k % 2, 1, (k + 1) % 2, 0}};
  for (size_t i = 0; i < b.x.size(); ++i)
    b.x[i] = 0.25f * static_cast<float>((i * 3 + static_cast<size_t>(k) * 5) % 9) - 1.0f;
  return b;
}

std::unique_ptr<Executor> make(const host::DeviceHandle& device, const Net& n) {
  host::exec::ExecutorOptions o;
  o.outputs = {"act", "loss"};  // the relu output is the logits
  auto e = Executor::create(device, n.graph, o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  const std::vector<float> w = {0.1f, -0.2f, 0.3f, 0.5f, 0.4f, -0.1f}, b = {0.05f, -0.1f};
  EXPECT_TRUE((*e)->write(n.w, w.data(), w.size() * sizeof(float)).ok());
  EXPECT_TRUE((*e)->write(n.b, b.data(), b.size() * sizeof(float)).ok());
  return std::move(*e);
}

// An executor of the same graph whose memory budget leaves `room` bytes
// beside its plan (null if it cannot be made), and that plan's total.
std::pair<std::unique_ptr<Executor>, uint64_t> with_room(const host::DeviceHandle& device, const Net& n,
                                                         uint64_t room) {
  const uint64_t planned = make(device, n)->plan().estimate.total;
  host::exec::ExecutorOptions o;
  o.outputs = {"act", "loss"};  // the relu output is the logits
  o.memory_budget = planned + room;
  auto e = Executor::create(device, n.graph, o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return {e.ok() ? std::move(*e) : nullptr, planned};
}

// Loss and logits of the run just finished.
std::vector<float> outputs(Executor& e, const Net& n) {
  std::vector<float> out(9);
  EXPECT_TRUE(e.read(n.logits, out.data(), 8 * sizeof(float)).ok());
  EXPECT_TRUE(e.read(n.loss, &out[8], sizeof(float)).ok());
  return out;
}

TEST_F(StagedInputs, StagingTheNextBatchGivesTheOutputsOfWritingIt) {
  const Net n = make_net();
  constexpr int kBatches = 5;
  auto written = make(*device_, n);
  std::vector<std::vector<float>> expected;
  for (int k = 0; k < kBatches; ++k) {
    const Batch b = batch(k);
    ASSERT_TRUE(written->write(n.x, b.x.data(), b.x.size() * sizeof(float)).ok());
    ASSERT_TRUE(written->write(n.labels, b.labels.data(), b.labels.size() * sizeof(int32_t)).ok());
    ASSERT_TRUE(written->run().ok());
    expected.push_back(outputs(*written, n));
  }

  auto staged = make(*device_, n);
  ASSERT_TRUE(staged->allow_staging(n.x).ok());
  ASSERT_TRUE(staged->allow_staging(n.labels).ok());
  const Batch first = batch(0);
  ASSERT_TRUE(staged->write(n.x, first.x.data(), first.x.size() * sizeof(float)).ok());
  ASSERT_TRUE(staged->write(n.labels, first.labels.data(), first.labels.size() * sizeof(int32_t)).ok());
  for (int k = 0; k < kBatches; ++k) {
    SCOPED_TRACE("batch " + std::to_string(k));
    if (k > 0) {
      ASSERT_TRUE(staged->use_staged().ok());
    }
    if (k + 1 < kBatches) {  // the next batch, from a host buffer gone right after
      Batch next = batch(k + 1);
      ASSERT_TRUE(staged->stage(n.x, next.x.data(), next.x.size() * sizeof(float)).ok());
      ASSERT_TRUE(staged->stage(n.labels, next.labels.data(), next.labels.size() * sizeof(int32_t)).ok());
      std::fill(next.x.begin(), next.x.end(), 1e9f);
    }
    ASSERT_TRUE(staged->run().ok());
    const std::vector<float> got = outputs(*staged, n);
    EXPECT_EQ(std::memcmp(got.data(), expected[static_cast<size_t>(k)].data(), got.size() * sizeof(float)),
              0);
  }
  // The last batch came from staging: reading the input gives its bytes.
  std::vector<float> x(12);
  ASSERT_TRUE(staged->read(n.x, x.data(), x.size() * sizeof(float)).ok());
  EXPECT_EQ(x, batch(kBatches - 1).x);
}

TEST_F(StagedInputs, AWriteReplacesAPendingStagedValue) {
  const Net n = make_net();
  auto e = make(*device_, n);
  ASSERT_TRUE(e->allow_staging(n.x).ok());
  const Batch a = batch(1), b = batch(2);
  ASSERT_TRUE(e->stage(n.x, a.x.data(), a.x.size() * sizeof(float)).ok());
  ASSERT_TRUE(e->write(n.x, b.x.data(), b.x.size() * sizeof(float)).ok());
  ASSERT_TRUE(e->use_staged().ok());  // nothing left to swap in
  std::vector<float> x(12);
  ASSERT_TRUE(e->read(n.x, x.data(), x.size() * sizeof(float)).ok());
  EXPECT_EQ(x, b.x);
}

TEST_F(StagedInputs, OnlyInputsCanBeStaged) {
  const Net n = make_net();
  auto e = make(*device_, n);
  auto parameter = e->allow_staging(n.w);
  ASSERT_FALSE(parameter.ok());
  EXPECT_NE(parameter.error().message.find("cannot stage 'fc.weight': it holds parameters, not an input"),
            std::string::npos)
      << parameter.error().message;
  auto activation = e->allow_staging(n.logits);
  ASSERT_FALSE(activation.ok());
  EXPECT_NE(activation.error().message.find("only inputs"), std::string::npos) << activation.error().message;
  const Batch b = batch(0);
  auto unprepared = e->stage(n.x, b.x.data(), b.x.size() * sizeof(float));
  ASSERT_FALSE(unprepared.ok());
  EXPECT_NE(
      unprepared.error().message.find("cannot stage 'input': it has no second buffer; call allow_staging"),
      std::string::npos)
      << unprepared.error().message;
  ASSERT_TRUE(e->allow_staging(n.x).ok());
  auto wrong_size = e->stage(n.x, b.x.data(), 4);
  ASSERT_FALSE(wrong_size.ok());
  EXPECT_NE(wrong_size.error().message.find("4 bytes given, it holds 48"), std::string::npos)
      << wrong_size.error().message;
}

TEST_F(StagedInputs, TheEstimateCountsTheSecondBufferAsTheExecutorAllocatesIt) {
  const Net n = make_net();
  auto e = make(*device_, n);
  const host::exec::MemoryEstimate before = e->plan().estimate;
  EXPECT_EQ(before.total - before.allocator_rounding, e->allocated_bytes());
  ASSERT_TRUE(e->allow_staging(n.x).ok());
  ASSERT_TRUE(e->allow_staging(n.labels).ok());
  ASSERT_TRUE(e->allow_staging(n.x).ok());  // once is enough: nothing more
  const host::exec::MemoryEstimate after = e->plan().estimate;
  EXPECT_EQ(after.inputs, before.inputs + 12 * 4 + 4 * 4);
  EXPECT_EQ(after.total - after.allocator_rounding,
            before.total - before.allocator_rounding + 12 * 4 + 4 * 4);
  EXPECT_EQ(after.total - after.allocator_rounding, e->allocated_bytes());
  // Rounding included, the estimate is what the device's allocator holds.
  EXPECT_EQ(after.total, device_->allocator().stats().allocated);
}

TEST_F(StagedInputs, ASecondBufferOverTheBudgetIsRefused) {
  const Net n = make_net();
  auto [e, planned] = with_room(*device_, n, 8);  // fits the plan, not 48 more bytes
  ASSERT_TRUE(e);
  auto r = e->allow_staging(n.x);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, TDM_OUT_OF_MEMORY);
  EXPECT_EQ(e->plan().estimate.total, planned);  // unchanged on refusal
}

// The run's own buffers beside the graph (the data-parallel all-reduce's
// packed buckets): counted in the estimate as the executor allocates them,
// and refused over the budget, naming what they are for.
TEST_F(StagedInputs, ARunBufferIsPlannedAsItIsAllocated) {
  const Net n = make_net();
  auto e = make(*device_, n);
  const host::exec::MemoryEstimate before = e->plan().estimate;
  auto buffer = e->reserve_buffer(1000, "the test's buffer");
  ASSERT_TRUE(buffer.ok()) << buffer.error().message;
  EXPECT_NE(*buffer, nullptr);
  const host::exec::MemoryEstimate after = e->plan().estimate;
  EXPECT_EQ(after.buffers, 1000u);
  EXPECT_EQ(after.total - after.allocator_rounding, before.total - before.allocator_rounding + 1000);
  EXPECT_EQ(after.total - after.allocator_rounding, e->allocated_bytes());
  EXPECT_EQ(after.total, device_->allocator().stats().allocated);
}

TEST_F(StagedInputs, ARunBufferOverTheBudgetIsRefusedByName) {
  const Net n = make_net();
  auto [e, planned] = with_room(*device_, n, 1024);  // room for 1 KiB, not 2
  ASSERT_TRUE(e);
  auto r = e->reserve_buffer(2000, "the test's buffer");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, TDM_OUT_OF_MEMORY);
  EXPECT_NE(r.error().message.find("the test's buffer (2.0 KiB) does not fit"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("memory budget"), std::string::npos) << r.error().message;
  EXPECT_EQ(e->plan().estimate.total, planned);  // unchanged on refusal
  EXPECT_TRUE(e->reserve_buffer(1000, "the test's buffer").ok());
}

}  // namespace
}  // namespace tandem::test
