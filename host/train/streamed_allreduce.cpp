#include "train/streamed_allreduce.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "exec/executor.hpp"
#include "exec/tensor_text.hpp"
#include "ops/shapes.hpp"
#include "train/gradient_buckets.hpp"
#include "util/last_error.hpp"

namespace tandem::host::train {

size_t StreamedBucket::bytes() const noexcept {
  size_t total = 0;
  for (const Part& p : parts) total += p.bytes;
  return total;
}

std::vector<StreamedBucket> streamed_buckets(const Graph& graph, const exec::Executor& executor,
                                             const std::vector<GradientBucket>& buckets) {
  std::vector<StreamedBucket> out;
  for (const GradientBucket& b : buckets) {
    StreamedBucket s;
    s.ready_at = b.ready_at;
    s.dtype = b.dtype;
    for (ValueId grad : b.gradients) {
      const Value& v = *graph.value(grad);
      s.parts.push_back({executor.device_pointer(grad),
                         static_cast<size_t>(ops::numel(v.type.dims)) * exec::dtype_size(v.type.dtype)});
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<StreamedBucket> split_large_gradients(std::vector<StreamedBucket> buckets, size_t limit) {
  if (limit == 0) return buckets;
  std::vector<StreamedBucket> out;
  for (StreamedBucket& b : buckets) {
    if (b.parts.size() == 1) {
      out.push_back(std::move(b));
      continue;
    }
    StreamedBucket packed{{}, b.ready_at, b.dtype};
    std::vector<StreamedBucket> alone;
    for (const StreamedBucket::Part& p : b.parts) {
      if (p.bytes >= limit)
        alone.push_back({{p}, b.ready_at, b.dtype});
      else
        packed.parts.push_back(p);
    }
    if (!packed.parts.empty()) out.push_back(std::move(packed));
    for (StreamedBucket& a : alone) out.push_back(std::move(a));
  }
  return out;
}

StreamedAllReduce::StreamedAllReduce(const Device& device, StreamAverager& comm,
                                     std::vector<StreamedBucket> buckets, bool record_spans)
    : device_(device), comm_(comm), buckets_(std::move(buckets)), record_spans_(record_spans) {}

Result<std::unique_ptr<StreamedAllReduce>> StreamedAllReduce::create(const Device& device,
                                                                     StreamAverager& comm,
                                                                     std::vector<StreamedBucket> buckets,
                                                                     const Reserve& reserve,
                                                                     bool record_spans) {
  if (device.api == nullptr || device.compute == nullptr || device.native == nullptr)
    return make_error(
        "data parallelism: the streamed all-reduce needs the compute stream and the backend's "
        "stream_native_handle",
        TDM_INTERNAL);
  std::unique_ptr<StreamedAllReduce> s(new StreamedAllReduce(device, comm, std::move(buckets), record_spans));
  if (auto r = s->allocate(reserve); !r) return r.error();
  if (record_spans) s->timer_ = std::thread([p = s.get()] { p->time_buckets(); });
  return s;
}

Result<void> StreamedAllReduce::allocate(const Reserve& reserve) {
  const tdm_backend_api& api = *device_.api;
  if (auto r = check(api.stream_create(device_.device, &stream_), "creating the communication stream"); !r)
    return r;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    tdm_event* ready = nullptr;
    tdm_event* done = nullptr;
    auto r = check(api.event_create(device_.device, &ready), "creating an event");
    if (r) ready_.push_back(ready);
    if (r) r = check(api.event_create(device_.device, &done), "creating an event");
    if (r) done_.push_back(done);
    if (!r) return r;
  }
  size_t largest = 0;
  for (const StreamedBucket& b : buckets_)
    if (b.parts.size() > 1) largest = std::max(largest, b.bytes());
  if (largest == 0) return {};
  auto buffer = reserve(largest);
  if (!buffer) return buffer.error();
  staging_ = *buffer;
  return {};
}

StreamedAllReduce::~StreamedAllReduce() {
  if (timer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    changed_.notify_all();
    timer_.join();
  }
  const tdm_backend_api& api = *device_.api;
  if (stream_ != nullptr) api.stream_synchronize(stream_);  // its copies read and write the gradients
  for (tdm_event* e : ready_) api.event_destroy(e);
  for (tdm_event* e : done_) api.event_destroy(e);
  if (stream_ != nullptr) api.stream_destroy(stream_);
}

Result<void> StreamedAllReduce::check(tdm_status status, const char* what) const {
  if (status == TDM_OK) return {};
  return make_error(
      std::string("data parallelism: ") + what + " failed: " + last_error_text("the backend gave no reason"),
      status);
}

Result<void> StreamedAllReduce::backward(size_t end, const Launch& launch) {
  size_t done = 0;
  Result<void> ran;
  issued_ = false;
  for (size_t b = 0; b < buckets_.size() && ran; ++b) {
    const size_t ready = std::min(buckets_[b].ready_at, end);
    if (ready > done) ran = launch(done, ready);
    done = std::max(done, ready);
    if (ran) ran = enqueue(b);
  }
  if (ran && done < end) ran = launch(done, end);
  // The optimizer (launched next on the compute stream) reads the averaged
  // gradients: a device-side wait, the host goes on. Also after a failure,
  // so nothing later reuses the gradients under the comm stream's copies.
  if (issued_) {
    auto waited = check(device_.api->stream_wait_event(device_.compute, done_[last_done_]),
                        "ordering the optimizer after the all-reduce");
    if (ran) ran = waited;
  }
  return ran;
}

Result<void> StreamedAllReduce::enqueue(size_t index) {
  const tdm_backend_api& api = *device_.api;
  const StreamedBucket& b = buckets_[index];
  if (auto r = check(api.event_record(ready_[index], device_.compute), "recording a bucket's event"); !r)
    return r;
  if (auto r = check(api.stream_wait_event(stream_, ready_[index]), "ordering a bucket's all-reduce"); !r)
    return r;
  const Clock::time_point enqueued = Clock::now();
  void* const native = device_.native(stream_);
  const size_t element = exec::dtype_size(b.dtype);
  Result<void> r;
  if (b.parts.size() == 1) {
    r = comm_.average(b.parts[0].data, b.parts[0].bytes / element, b.dtype, native);
  } else {
    auto* staging = static_cast<unsigned char*>(staging_);
    size_t offset = 0;
    for (const StreamedBucket::Part& p : b.parts) {
      if (!r) break;
      r = check(api.copy_d2d(stream_, staging + offset, p.data, p.bytes), "packing a gradient bucket");
      offset += p.bytes;
    }
    if (r) r = comm_.average(staging_, offset / element, b.dtype, native);
    offset = 0;
    for (const StreamedBucket::Part& p : b.parts) {
      if (!r) break;
      r = check(api.copy_d2d(stream_, p.data, staging + offset, p.bytes), "unpacking a gradient bucket");
      offset += p.bytes;
    }
  }
  // Recorded even after a failure: backward() orders the compute stream
  // after whatever the comm stream was given.
  auto recorded = check(api.event_record(done_[index], stream_), "recording a bucket's event");
  if (recorded) {
    issued_ = true;
    last_done_ = index;
  }
  if (!r) return r;
  if (!recorded) return recorded;
  if (record_spans_) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      to_time_.emplace_back(index, enqueued);
    }
    changed_.notify_all();
  }
  return {};
}

void StreamedAllReduce::time_buckets() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return quit_ || !to_time_.empty(); });
    if (to_time_.empty()) return;
    const auto [index, enqueued] = to_time_.front();
    lock.unlock();
    // Blocks this helper thread only (the events are the comm stream's).
    device_.api->event_synchronize(done_[index]);
    const Clock::time_point end = Clock::now();
    lock.lock();
    const Clock::time_point begin = spans_.empty() ? enqueued : std::max(enqueued, spans_.back().end);
    spans_.push_back({index, buckets_[index].bytes(), begin, std::max(begin, end)});
    to_time_.pop_front();
    changed_.notify_all();
  }
}

std::vector<StreamedAllReduce::Span> StreamedAllReduce::take_spans() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return to_time_.empty(); });
  return std::exchange(spans_, {});
}

}  // namespace tandem::host::train
