// The streamed all-reduce's ordering (host/train/streamed_allreduce.hpp),
// without a GPU: a fake backend table and a fake communicator record every
// stream, event, copy and collective call in one log. The fake streams are
// synchronous (a copy happens when it is enqueued, as on a backend with no
// asynchrony), and the launch callback writes each node's gradient when the
// node is launched, so an all-reduce enqueued before its producers would
// average stale bytes and the results would differ.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "train/streamed_allreduce.hpp"

struct tdm_stream {
  std::string name;
};
struct tdm_event {
  std::string name;
};

namespace tandem::host::train {
namespace {

// The one log of a test; the C functions of the fake table reach it here.
struct Log {
  std::mutex mutex;  // event_synchronize is called from the timing thread
  std::vector<std::string> calls;
  int events = 0;
  void add(std::string call) {
    std::lock_guard<std::mutex> lock(mutex);
    calls.push_back(std::move(call));
  }
};
Log* g_log = nullptr;

tdm_status stream_create(tdm_device*, tdm_stream** out) {
  *out = new tdm_stream{"comm"};
  return TDM_OK;
}
void stream_destroy(tdm_stream* s) {
  delete s;
}
tdm_status stream_synchronize(tdm_stream* s) {
  g_log->add("sync " + s->name);
  return TDM_OK;
}
tdm_status event_create(tdm_device*, tdm_event** out) {
  *out = new tdm_event{"e" + std::to_string(g_log->events++)};
  return TDM_OK;
}
void event_destroy(tdm_event* e) {
  delete e;
}
tdm_status event_record(tdm_event* e, tdm_stream* s) {
  g_log->add("record " + e->name + " " + s->name);
  return TDM_OK;
}
tdm_status stream_wait_event(tdm_stream* s, tdm_event* e) {
  g_log->add("wait " + s->name + " " + e->name);
  return TDM_OK;
}
tdm_status event_synchronize(tdm_event*) {
  return TDM_OK;
}
tdm_status copy_d2d(tdm_stream* s, void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  g_log->add("copy " + s->name);
  return TDM_OK;
}
void* native(tdm_stream* s) {
  return s;
}  // the "native handle" is the stream itself

tdm_backend_api fake_api() {
  tdm_backend_api api{};
  api.struct_size = sizeof api;
  api.stream_create = stream_create;
  api.stream_destroy = stream_destroy;
  api.stream_synchronize = stream_synchronize;
  api.event_create = event_create;
  api.event_destroy = event_destroy;
  api.event_record = event_record;
  api.stream_wait_event = stream_wait_event;
  api.event_synchronize = event_synchronize;
  api.copy_d2d = copy_d2d;
  return api;
}

// Two ranks, the other holding 3x + 1 wherever this one holds x: the mean
// is 2x + 0.5 element by element, whether a bucket is packed or not.
float mean_with_other_rank(float x) {
  return (x + (3 * x + 1)) / 2;
}

struct FakeComm final : StreamAverager {
  int fail_at = -1;  // the call that fails (0-based), -1: none
  int calls = 0;
  std::vector<size_t> counts;
  Result<void> average(void* buffer, size_t count, tdm_dtype dtype, void* stream) override {
    EXPECT_EQ(dtype, TDM_F32);
    g_log->add("average " + static_cast<tdm_stream*>(stream)->name);
    if (calls++ == fail_at) return make_error("the fake communicator failed", TDM_INTERNAL);
    counts.push_back(count);
    auto* f = static_cast<float*>(buffer);
    for (size_t i = 0; i < count; ++i) f[i] = mean_with_other_rank(f[i]);
    return {};
  }
};

// Six backward nodes; node i produces gradient i (sizes in floats).
// Buckets: {0, 1, 2} final after node 2, {3} after 3, {4, 5} after 5.
class StreamedAllReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_log = &log_;
    api_ = fake_api();
    const size_t sizes[] = {3, 5, 2, 7, 4, 1};
    for (size_t n : sizes) grads_.emplace_back(n, 0.0f);
  }
  void TearDown() override { g_log = nullptr; }

  std::vector<StreamedBucket> buckets() {
    auto part = [&](size_t g) {
      return StreamedBucket::Part{grads_[g].data(), grads_[g].size() * sizeof(float)};
    };
    std::vector<StreamedBucket> b(3);
    b[0].parts = {part(0), part(1), part(2)};
    b[0].ready_at = 3;
    b[1].parts = {part(3)};
    b[1].ready_at = 4;
    b[2].parts = {part(4), part(5)};
    b[2].ready_at = 6;
    return b;
  }
  // The packed buckets' buffer from the caller (in a run, the executor's
  // plan), logged; refused when `refuse` is set, as a budget would.
  Result<void*> reserve(size_t bytes) {
    log_.add("reserve " + std::to_string(bytes));
    if (refuse_reserve_) return make_error("over the memory budget", TDM_OUT_OF_MEMORY);
    reserved_.emplace_back(bytes);
    return static_cast<void*>(reserved_.back().data());
  }
  Result<std::unique_ptr<StreamedAllReduce>> create(bool spans = false) {
    StreamedAllReduce::Device d{&api_, nullptr, &compute_, native};
    return StreamedAllReduce::create(
        d, comm_, buckets(), [this](size_t bytes) { return reserve(bytes); }, spans);
  }
  std::unique_ptr<StreamedAllReduce> make(bool spans = false) {
    auto s = create(spans);
    EXPECT_TRUE(s) << s.error().message;
    return s ? std::move(*s) : nullptr;
  }
  // Launching node i writes gradient i: values that tell the nodes apart.
  StreamedAllReduce::Launch launcher() {
    return [this](size_t first, size_t end) -> Result<void> {
      log_.add("launch " + std::to_string(first) + " " + std::to_string(end));
      for (size_t i = first; i < end; ++i)
        for (size_t k = 0; k < grads_[i].size(); ++k) grads_[i][k] = float(10 * i + k) + 0.25f;
      return {};
    };
  }
  std::vector<std::string> calls_from(const std::string& first) {
    auto it = std::find(log_.calls.begin(), log_.calls.end(), first);
    return {it, log_.calls.end()};
  }

  Log log_;
  tdm_backend_api api_{};
  tdm_stream compute_{"compute"};
  FakeComm comm_;
  std::vector<std::vector<float>> grads_;
  bool refuse_reserve_ = false;
  std::vector<std::vector<unsigned char>> reserved_;
};

TEST_F(StreamedAllReduceTest, ReservesTheLargestPackedBucketOnceUpFront) {
  auto s = make();
  ASSERT_TRUE(s);
  // {0, 1, 2} is 10 floats, {4, 5} 5; {3} is reduced in place. Nothing is
  // allocated behind the reservation (the fake table has no mem_alloc).
  EXPECT_EQ(log_.calls, std::vector<std::string>{"reserve 40"});
}

// A plan with no room for the buffer: the run stops with the reason.
TEST_F(StreamedAllReduceTest, ARefusedReservationIsTheError) {
  refuse_reserve_ = true;
  auto s = create();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().status, TDM_OUT_OF_MEMORY);
  EXPECT_NE(s.error().message.find("over the memory budget"), std::string::npos) << s.error().message;
}

// The exact sequence: each bucket's event recorded on the compute stream
// right after the launch that ran its last producer, the comm stream waiting
// on it, pack, one collective on the comm stream, unpack, the done event;
// at the end the compute stream waits on the last done event. No host
// synchronisation of either stream anywhere.
TEST_F(StreamedAllReduceTest, EachBucketIsOrderedByEventsOnTheCommStream) {
  auto s = make();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->backward(6, launcher()));
  const std::vector<std::string> expected = {
      "launch 0 3",     "record e0 compute", "wait comm e0",      "copy comm",    "copy comm",
      "copy comm",      "average comm",      "copy comm",         "copy comm",    "copy comm",
      "record e1 comm", "launch 3 4",        "record e2 compute", "wait comm e2", "average comm",
      "record e3 comm", "launch 4 6",        "record e4 compute", "wait comm e4", "copy comm",
      "copy comm",      "average comm",      "copy comm",         "copy comm",    "record e5 comm",
      "wait compute e5"};
  EXPECT_EQ(calls_from("launch 0 3"), expected);
  for (const std::string& call : log_.calls) EXPECT_EQ(call.rfind("sync", 0), std::string::npos) << call;
}

TEST_F(StreamedAllReduceTest, OneCollectivePerBucketWithItsWholeCount) {
  auto s = make();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->backward(6, launcher()));
  EXPECT_EQ(comm_.counts, (std::vector<size_t>{10, 7, 5}));
}

// The same numbers as averaging every gradient alone, after its producer.
TEST_F(StreamedAllReduceTest, ResultsEqualPerTensorAveraging) {
  auto s = make();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->backward(6, launcher()));
  for (size_t i = 0; i < grads_.size(); ++i)
    for (size_t k = 0; k < grads_[i].size(); ++k)
      EXPECT_EQ(grads_[i][k], mean_with_other_rank(float(10 * i + k) + 0.25f))
          << "gradient " << i << "[" << k << "]";
}

// Steps reuse the events and the staging buffer: a second step gives the
// same sequence and the same numbers.
TEST_F(StreamedAllReduceTest, ASecondStepRepeatsTheSameOrder) {
  auto s = make();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->backward(6, launcher()));
  const std::vector<std::string> first = calls_from("launch 0 3");
  log_.calls.clear();
  ASSERT_TRUE(s->backward(6, launcher()));
  EXPECT_EQ(log_.calls, first);
  EXPECT_EQ(grads_[5][0], mean_with_other_rank(50.25f));
}

// A failed collective stops the later buckets (the communicator is
// unusable), but the compute stream still waits on what the comm stream was
// given, so nothing reuses the gradients under its copies.
TEST_F(StreamedAllReduceTest, AFailedCollectiveStopsAndStillOrdersTheComputeStream) {
  comm_.fail_at = 1;
  auto s = make();
  ASSERT_TRUE(s);
  auto r = s->backward(6, launcher());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("fake communicator"), std::string::npos) << r.error().message;
  EXPECT_EQ(comm_.calls, 2);
  EXPECT_EQ(log_.calls.back(), "wait compute e3");
  EXPECT_EQ(std::count(log_.calls.begin(), log_.calls.end(), "launch 4 6"), 0);
}

// --profile: one span per bucket, in order, each after its enqueue.
TEST_F(StreamedAllReduceTest, SpansOnePerBucketWhenProfiling) {
  auto s = make(true);
  ASSERT_TRUE(s);
  const auto before = StreamedAllReduce::Clock::now();
  ASSERT_TRUE(s->backward(6, launcher()));
  const auto spans = s->take_spans();
  ASSERT_EQ(spans.size(), 3u);
  const size_t bytes[] = {40, 28, 20};
  for (size_t b = 0; b < spans.size(); ++b) {
    EXPECT_EQ(spans[b].bucket, b);
    EXPECT_EQ(spans[b].bytes, bytes[b]);
    EXPECT_LE(before, spans[b].begin);
    EXPECT_LE(spans[b].begin, spans[b].end);
    if (b > 0) {
      EXPECT_LE(spans[b - 1].end, spans[b].begin);
    }
  }
  EXPECT_TRUE(s->take_spans().empty());
}

TEST_F(StreamedAllReduceTest, DestructionWaitsForTheCommStream) {
  auto s = make();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->backward(6, launcher()));
  s.reset();
  EXPECT_EQ(log_.calls.back(), "sync comm");
}

// A gradient of bucket_bytes or more is reduced alone, after the rest of
// its bucket, so the staging buffer never has to hold it.
TEST(StreamedBuckets, LargeGradientsAreReducedAloneAfterTheirBucket) {
  float a[4], b[64], c[2], d[64];
  auto part = [](float* p, size_t n) { return StreamedBucket::Part{p, n * sizeof(float)}; };
  std::vector<StreamedBucket> in(2);
  in[0].parts = {part(a, 4), part(b, 64), part(c, 2)};
  in[0].ready_at = 5;
  in[1].parts = {part(d, 64)};
  in[1].ready_at = 9;
  const auto out = split_large_gradients(in, 256);
  ASSERT_EQ(out.size(), 3u);
  ASSERT_EQ(out[0].parts.size(), 2u);
  EXPECT_EQ(out[0].parts[0].data, a);
  EXPECT_EQ(out[0].parts[1].data, c);
  EXPECT_EQ(out[0].ready_at, 5u);
  ASSERT_EQ(out[1].parts.size(), 1u);
  EXPECT_EQ(out[1].parts[0].data, b);
  EXPECT_EQ(out[1].ready_at, 5u);
  EXPECT_EQ(out[2].parts[0].data, d);
  EXPECT_EQ(out[2].ready_at, 9u);
  EXPECT_EQ(split_large_gradients(in, 0).size(), 2u);  // bucket_bytes 0: unchanged
}

}  // namespace
}  // namespace tandem::host::train
