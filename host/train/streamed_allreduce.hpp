// Data parallelism on a device the host cannot address (GPUs): each
// gradient bucket is all-reduced on a communication stream of its own,
// ordered with the compute stream by events, so backward never waits on the
// host for a collective and the host never waits for backward at a bucket
// boundary.
//
// Per bucket, on the training thread, right after the nodes that finish its
// gradients were launched (GradientBucket::ready_at), without waiting:
//   event_record(ready[b], compute)       after the gradients' producers
//   stream_wait_event(comm, ready[b])     the comm stream starts there
//   copy_d2d x n (comm)                   pack into one staging buffer
//   one average (comm's native handle)    one collective per bucket
//   copy_d2d x n (comm)                   unpack
//   event_record(done[b], comm)
// and once backward is launched, stream_wait_event(compute, done[last]): the
// optimizer, launched next on the compute stream, sees averaged gradients
// (the comm stream runs its buckets in order, so the last covers them all).
//
// Why pack and not an NCCL group: packing needs nothing the ABI lacks
// (mem_alloc, copy_d2d, one allreduce with a stream), works with any comm
// plugin, and is what the host path already does; one large collective
// also reaches the link's bandwidth where a group of small ones pays each
// one's setup. Its price is one extra device buffer of the largest
// multi-gradient bucket (allocated once here, outside the plan's memory
// estimate; under 2 x --bucket-mb, see split_large_gradients) and two
// device-local copies of each bucket, cheap beside the link. A bucket of
// one gradient is reduced in place, without copies.
//
// Averaging stays the communicator's TDM_REDUCE_AVG (NCCL's ncclAvg), as on
// the host path.
//
// Thread use: the training thread only (collectives are issued from one
// thread, in bucket order, which is the same on every rank). With spans
// recorded (--profile) a helper thread waits for each bucket's done event to
// time it on the host (see take_spans); the backend's event_synchronize may
// spin a core while it waits, which only a profiled run pays. The ABI has no
// event timing, hence host times.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tandem/backend.h"
#include "train/gradient_buckets.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {
class Executor;
}

namespace tandem::host::train {

// Averages a device buffer across ranks, enqueued on `stream` (a backend's
// native stream handle): GradientCommunicator in a run, fakes in tests.
class StreamAverager {
 public:
  virtual ~StreamAverager() = default;
  virtual Result<void> average(void* buffer, size_t count, tdm_dtype dtype, void* stream) = 0;
};

struct StreamedBucket {
  struct Part {
    void* data;  // device memory, fixed for the executor's life
    size_t bytes;
  };
  std::vector<Part> parts;  // the bucket's gradients
  size_t ready_at = 0;      // schedule position after which all are final
  tdm_dtype dtype = TDM_F32;
  size_t bytes() const noexcept;
};

// The buckets' gradients' addresses in `executor` (a single-device one).
std::vector<StreamedBucket> streamed_buckets(const Graph& graph, const exec::Executor& executor,
                                             const std::vector<GradientBucket>& buckets);
// A gradient of `limit` bytes or more leaves its bucket and is reduced
// alone, in place: packing it would need a staging buffer as large as itself
// (a bucket closes only once it has reached bucket_bytes, so one embedding
// can make it hundreds of MiB). The rest of the bucket stays packed, first;
// the pieces keep the bucket's ready_at and order. So the staging buffer
// stays under 2 x limit. limit 0: no change.
std::vector<StreamedBucket> split_large_gradients(std::vector<StreamedBucket> buckets, size_t limit);

class StreamedAllReduce {
 public:
  using Clock = std::chrono::steady_clock;
  using Span = AllReduceSpan;
  // The compute stream's device and backend; `native` is the backend's
  // stream_native_handle (required: the comm plugin enqueues on it).
  struct Device {
    const tdm_backend_api* api = nullptr;
    tdm_device* device = nullptr;
    tdm_stream* compute = nullptr;
    void* (*native)(tdm_stream*) = nullptr;
  };
  using Launch = std::function<Result<void>(size_t first, size_t end)>;
  // A device buffer of the given bytes for the packed buckets, owned by the
  // caller and valid as long as this object (Executor::reserve_buffer,
  // which counts it in the run's memory plan).
  using Reserve = std::function<Result<void*>(size_t bytes)>;

  // Creates the comm stream and two events per bucket, and reserves the
  // staging buffer (the largest packed bucket) once.
  static Result<std::unique_ptr<StreamedAllReduce>> create(const Device& device, StreamAverager& comm,
                                                           std::vector<StreamedBucket> buckets,
                                                           const Reserve& reserve, bool record_spans);
  // Waits for the comm stream (its copies use the gradients), then frees.
  ~StreamedAllReduce();
  StreamedAllReduce(const StreamedAllReduce&) = delete;
  StreamedAllReduce& operator=(const StreamedAllReduce&) = delete;

  const std::vector<StreamedBucket>& buckets() const noexcept { return buckets_; }
  // Launches nodes [0, end) through `launch` (the executor's launch_range)
  // with each bucket's all-reduce enqueued at its boundary, then orders the
  // compute stream after the last one. Nothing here waits on the host.
  // After a failure the compute stream is still ordered after what was
  // enqueued, so the gradients are not reused under a running copy.
  Result<void> backward(size_t end, const Launch& launch);
  // record_spans: the spans of the last backward(), waiting for their ends.
  // A span begins when it was enqueued or when the comm stream finished the
  // bucket before (whichever is later: the stream runs them in order) and
  // ends when the host saw its done event complete, so a span is an upper
  // bound of the collective's time on the device by the host's wake-up.
  std::vector<Span> take_spans();

 private:
  StreamedAllReduce(const Device& device, StreamAverager& comm, std::vector<StreamedBucket> buckets,
                    bool record_spans);
  Result<void> allocate(const Reserve& reserve);
  Result<void> enqueue(size_t index);
  Result<void> check(tdm_status status, const char* what) const;
  void time_buckets();  // the helper thread of record_spans

  Device device_;
  StreamAverager& comm_;
  std::vector<StreamedBucket> buckets_;
  tdm_stream* stream_ = nullptr;          // the comm stream
  std::vector<tdm_event*> ready_, done_;  // per bucket
  void* staging_ = nullptr;               // the largest multi-gradient bucket (the caller's)
  bool issued_ = false;                   // done events recorded since the last wait
  size_t last_done_ = 0;

  // record_spans only.
  const bool record_spans_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<size_t, Clock::time_point>> to_time_;  // (bucket, enqueued)
  std::vector<Span> spans_;
  bool quit_ = false;
  std::thread timer_;
};

}  // namespace tandem::host::train
