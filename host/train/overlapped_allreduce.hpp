// Data parallelism: all-reduces gradient buckets on a communication thread
// while the training thread runs the rest of backward.
//
// The training thread calls start(b) once bucket b's gradients are final
// (GradientBucket::ready_at) and finish() before anything reads the averaged
// gradients. Between the two, nothing may write those gradients; nothing
// does, because a gradient is final only after its last writer and reader in
// backward ran. Buckets are reduced one at a time, in start order, which is
// the same order on every rank (the schedule is), so the collectives match.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "exec/executor.hpp"
#include "train/distributed.hpp"
#include "train/gradient_buckets.hpp"

namespace tandem::host::train {

class OverlappedAllReduce {
 public:
  using Clock = std::chrono::steady_clock;
  using Span = AllReduceSpan;

  // Gradient addresses are taken from `executor` now (they do not move).
  // With `host_addressable` memory a bucket's gradients are packed into one
  // message; device memory is reduced tensor by tensor in place. Device
  // memory comes here only where streamed_allreduce.hpp cannot order itself
  // with the nodes (a run composed of several devices, or a backend without
  // stream_native_handle); otherwise the trainer uses that.
  OverlappedAllReduce(GradientCommunicator& comm, const exec::Executor& executor, const Graph& graph,
                      std::vector<GradientBucket> buckets, bool host_addressable, bool record_spans);
  ~OverlappedAllReduce();
  OverlappedAllReduce(const OverlappedAllReduce&) = delete;
  OverlappedAllReduce& operator=(const OverlappedAllReduce&) = delete;

  const std::vector<GradientBucket>& buckets() const noexcept { return buckets_; }
  // Queues bucket `index` for averaging across ranks.
  void start(size_t index);
  // Waits until every started bucket is averaged; the first failure, if any
  // (later buckets are then not sent: the communicator is unusable).
  Result<void> finish();
  // Spans recorded since the last call (record_spans only).
  std::vector<Span> take_spans();

 private:
  struct Part {
    void* data;
    size_t bytes;
  };
  void work();
  Result<void> reduce(size_t index);

  GradientCommunicator& comm_;
  std::vector<GradientBucket> buckets_;
  std::vector<std::vector<Part>> parts_;  // per bucket: its gradients' memory
  std::vector<unsigned char> staging_;    // a multi-gradient bucket, packed
  const bool host_addressable_;
  const bool record_spans_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<size_t> queue_;
  size_t in_flight_ = 0;  // queued or being reduced
  bool quit_ = false;
  std::optional<Error> failure_;
  std::vector<Span> spans_;
  std::thread worker_;  // last: starts after everything it reads exists
};

}  // namespace tandem::host::train
