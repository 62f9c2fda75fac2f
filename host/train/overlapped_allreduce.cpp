#include "train/overlapped_allreduce.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "exec/tensor_text.hpp"
#include "ops/shapes.hpp"

namespace tandem::host::train {

OverlappedAllReduce::OverlappedAllReduce(GradientCommunicator& comm, const exec::Executor& executor,
                                         const Graph& graph, std::vector<GradientBucket> buckets,
                                         bool host_addressable, bool record_spans)
    : comm_(comm),
      buckets_(std::move(buckets)),
      host_addressable_(host_addressable),
      record_spans_(record_spans) {
  size_t largest = 0;
  for (const GradientBucket& b : buckets_) {
    std::vector<Part> parts;
    for (ValueId grad : b.gradients) {
      const Value& v = *graph.value(grad);
      parts.push_back({executor.device_pointer(grad),
                       static_cast<size_t>(ops::numel(v.type.dims)) * exec::dtype_size(v.type.dtype)});
    }
    if (parts.size() > 1 && host_addressable_) largest = std::max(largest, b.bytes);
    parts_.push_back(std::move(parts));
  }
  staging_.resize(largest);
  worker_ = std::thread([this] { work(); });
}

OverlappedAllReduce::~OverlappedAllReduce() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void OverlappedAllReduce::start(size_t index) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(index);
    ++in_flight_;
  }
  changed_.notify_all();
}

Result<void> OverlappedAllReduce::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return in_flight_ == 0; });
  if (failure_) return *failure_;
  return {};
}

std::vector<OverlappedAllReduce::Span> OverlappedAllReduce::take_spans() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(spans_, {});
}

void OverlappedAllReduce::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return quit_ || !queue_.empty(); });
    if (queue_.empty()) return;  // quit_ with nothing left
    const size_t index = queue_.front();
    queue_.pop_front();
    const bool failed = failure_.has_value();
    lock.unlock();
    const Clock::time_point begin = Clock::now();
    auto r = failed ? Result<void>{} : reduce(index);
    const Clock::time_point end = Clock::now();
    lock.lock();
    if (!r && !failure_) failure_ = r.error();
    if (record_spans_ && !failed) spans_.push_back({index, buckets_[index].bytes, begin, end});
    --in_flight_;
    changed_.notify_all();
  }
}

Result<void> OverlappedAllReduce::reduce(size_t index) {
  const GradientBucket& b = buckets_[index];
  const std::vector<Part>& parts = parts_[index];
  const size_t count = b.bytes / exec::dtype_size(b.dtype);
  if (parts.size() == 1) return comm_.average(parts[0].data, count, b.dtype);
  if (!host_addressable_) {
    for (const Part& p : parts)
      if (auto r = comm_.average(p.data, p.bytes / exec::dtype_size(b.dtype), b.dtype); !r) return r;
    return {};
  }
  // One message instead of many: the per-call latency dominates small tensors.
  size_t offset = 0;
  for (const Part& p : parts) {
    std::memcpy(staging_.data() + offset, p.data, p.bytes);
    offset += p.bytes;
  }
  if (auto r = comm_.average(staging_.data(), count, b.dtype); !r) return r;
  offset = 0;
  for (const Part& p : parts) {
    std::memcpy(p.data, staging_.data() + offset, p.bytes);
    offset += p.bytes;
  }
  return {};
}

}  // namespace tandem::host::train
