// NCCL comm plugin — communicator creation, the collectives and the
// watchdog that turns a hang into TDM_TIMEOUT.
#include "comm.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "nccl_types.hpp"

namespace tandem::nccl {

namespace {

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

ncclRedOp_t op_of(tdm_reduce_op op) {
  const auto o = nccl_op(op);
  if (!o) throw Error(TDM_UNSUPPORTED, "nccl: reduce op " + std::to_string(op) + " is not supported");
  return *o;
}

}  // namespace

[[noreturn]] void fail_cuda(cudaError_t rc, const std::string& what) {
  const tdm_status status =
      rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver ? TDM_UNAVAILABLE : TDM_INTERNAL;
  throw Error(status, "nccl: " + what + " failed: " + cudaGetErrorString(rc));
}
void check_cuda(cudaError_t rc, const std::string& what) {
  if (rc != cudaSuccess) fail_cuda(rc, what);
}

void check_nccl(ncclResult_t rc, const std::string& what) {
  if (rc != ncclSuccess && rc != ncclInProgress)
    throw Error(TDM_INTERNAL, "nccl: " + what + " failed: " + ncclGetErrorString(rc));
}

ncclDataType_t type_of(tdm_dtype dtype) {
  const auto t = nccl_type(dtype);
  if (!t) throw Error(TDM_UNSUPPORTED, "nccl: dtype " + std::to_string(dtype) + " is not supported");
  return *t;
}

NcclComm::NcclComm(const tdm_comm_init_info& info) {
  if (!TDM_STRUCT_HAS(&info, tdm_comm_init_info, unique_id_bytes))
    throw Error(TDM_INVALID_ARGUMENT, "nccl: tdm_comm_init_info too small");
  if (info.unique_id == nullptr || info.unique_id_bytes != sizeof(ncclUniqueId))
    throw Error(TDM_INVALID_ARGUMENT, "nccl: comm_create needs the " + std::to_string(sizeof(ncclUniqueId)) +
                                          "-byte id from rank 0's comm_unique_id (got " +
                                          std::to_string(info.unique_id_bytes) + " bytes)");
  if (info.world_size <= 0 || info.rank < 0 || info.rank >= info.world_size)
    throw Error(TDM_INVALID_ARGUMENT, "nccl: rank " + std::to_string(info.rank) + " of world size " +
                                          std::to_string(info.world_size) + " is not valid");
  rank_ = info.rank;
  size_ = info.world_size;
  if (TDM_STRUCT_HAS(&info, tdm_comm_init_info, timeout_seconds) && info.timeout_seconds > 0)
    timeout_ = info.timeout_seconds;

  try {
    open(info);
  } catch (...) {
    // No destructor runs for a constructor that throws: free here what open()
    // made, a half-initialised communicator included (ncclCommAbort frees one
    // in any state; a timed-out init was aborted already), so a failed init
    // can be retried in the same process.
    close_lanes(true);
    if (comm_ != nullptr && !aborted_) ncclCommAbort(comm_);
    comm_ = nullptr;
    release_cuda();
    throw;
  }
}

void NcclComm::open(const tdm_comm_init_info& info) {
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  device_ = communicator_device(info, count);
  check_cuda(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
  check_cuda(cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&scratch_), sizeof(float)), "cudaMalloc");

  ncclUniqueId id;
  std::memcpy(&id, info.unique_id, sizeof id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = timeout_ > 0 ? 0 : 1;  // non-blocking: every call returns, we poll with a deadline
  const std::string what = "ncclCommInitRankConfig (rank " + std::to_string(rank_) + " of " +
                           std::to_string(size_) + ", GPU " + std::to_string(device_) + ")";
  settle(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), what, deadline());
  if (TDM_STRUCT_HAS(&info, tdm_comm_init_info, point_to_point) && info.point_to_point != 0 && size_ > 1)
    open_lanes(config);
  if (timeout_ > 0) watchdog_ = std::thread([this] { watchdog(); });
}

void NcclComm::release_cuda() {
  for (const Pending& p : pending_) cudaEventDestroy(p.event);
  pending_.clear();
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  spare_events_.clear();
  if (scratch_ != nullptr) cudaFree(scratch_);
  scratch_ = nullptr;
  if (own_stream_ != nullptr) cudaStreamDestroy(own_stream_);
  own_stream_ = nullptr;
}

NcclComm::~NcclComm() {
  if (watchdog_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(pending_mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
  }
  cudaSetDevice(device_);
  close_lanes(aborted_);
  if (comm_ != nullptr && !aborted_) {
    try {
      std::lock_guard<std::mutex> lock(call_mutex_);
      settle(ncclCommFinalize(comm_), "ncclCommFinalize", deadline());  // flushes issued work
      ncclCommDestroy(comm_);
    } catch (const Error& e) {
      Host::log(TDM_LOG_WARNING, e.what());
      ncclCommAbort(comm_);
    }
  }
  release_cuda();
}

NcclComm::Clock::time_point NcclComm::deadline() const {
  if (timeout_ <= 0) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
}

// Polling waits back off: a few yields (a collective that is about to end
// is not delayed), then sleeps growing to 1 ms, so waiting for a long
// all-reduce does not keep a core busy that the data loader and the CPU part
// of the model need.
void NcclComm::back_off(int& round) {
  if (++round < 64) {
    std::this_thread::yield();
    return;
  }
  const int64_t micros = std::min<int64_t>(int64_t(50) << std::min(round - 64, 5), 1000);
  std::this_thread::sleep_for(std::chrono::microseconds(micros));
}

void NcclComm::settle(ncclResult_t rc, const std::string& what, Clock::time_point until) {
  settle_on(comm_, rc, what, until);
}

void NcclComm::settle_on(ncclComm_t comm, ncclResult_t rc, const std::string& what, Clock::time_point until) {
  int round = 0;
  while (rc == ncclInProgress) {
    if (Clock::now() > until) {
      abort_locked(what + " did not finish within " + seconds(timeout_) + " (timeout_seconds)");
      throw_if_aborted();
    }
    back_off(round);
    if (ncclCommGetAsyncError(comm, &rc) != ncclSuccess) break;
  }
  if (rc == ncclSuccess) return;
  const char* detail = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  std::string msg = "nccl: " + what + " failed: " + ncclGetErrorString(rc);
  if (detail != nullptr && *detail != '\0') msg += std::string(" (") + detail + ")";
  throw Error(TDM_INTERNAL, msg);
}

void NcclComm::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  abort_locked(reason);
}

void NcclComm::abort_locked(const std::string& reason) {
  if (aborted_) return;
  abort_reason_ = "nccl: rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + reason +
                  "; NCCL cannot tell which ranks are missing: look for the rank whose log stops first. "
                  "The communicator was aborted (ncclCommAbort): stop the job.";
  aborted_ = true;
  // The lanes first: their stuck sends and receives exit. An aborted
  // communicator is freed: forgotten here, so nothing frees it again.
  for (std::vector<Lane>* lanes : {&to_, &from_})
    for (Lane& lane : *lanes)
      if (lane.comm != nullptr) ncclCommAbort(std::exchange(lane.comm, nullptr));
  if (comm_ != nullptr) ncclCommAbort(comm_);
  Host::log(TDM_LOG_ERROR, abort_reason_);
}

void NcclComm::throw_if_aborted() const {
  if (aborted_) throw Error(TDM_TIMEOUT, abort_reason_);
}

std::string NcclComm::describe(const char* name, size_t count, tdm_dtype dtype, const char* op) const {
  std::string s = std::string(name) + " #" + std::to_string(seq_) + " (" + std::to_string(count) + " x " +
                  dtype_name(dtype);
  if (op != nullptr) s += std::string(", ") + op;
  return s + ")";
}

template <class Enqueue>
void NcclComm::collective(const std::string& what, void* stream, Enqueue enqueue) {
  throw_if_aborted();
  const bool own = stream == nullptr;
  cudaStream_t s = own ? own_stream_ : static_cast<cudaStream_t>(stream);
  {
    // Held until the call has settled, so the watchdog's abort never frees
    // the communicator under a running NCCL call.
    std::lock_guard<std::mutex> lock(call_mutex_);
    throw_if_aborted();
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    settle(enqueue(s), what, deadline());
  }
  if (timeout_ > 0) track(s, what);
  if (own) wait_stream(s, what);
}

void NcclComm::track(cudaStream_t stream, const std::string& what) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  cudaEvent_t event = nullptr;
  if (!spare_events_.empty()) {
    event = spare_events_.back();
    spare_events_.pop_back();
  } else {
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  }
  check_cuda(cudaEventRecord(event, stream), "cudaEventRecord");
  pending_.push_back(Pending{event, what, Clock::now()});
  wake_.notify_all();
}

void NcclComm::wait_stream(cudaStream_t stream, const std::string& what) {
  if (timeout_ <= 0) {
    check_cuda(cudaStreamSynchronize(stream), what + ": cudaStreamSynchronize");
    return;
  }
  const auto until = deadline();
  for (int round = 0;;) {
    const cudaError_t rc = cudaStreamQuery(stream);
    if (rc == cudaSuccess) return;
    throw_if_aborted();
    if (rc != cudaErrorNotReady) fail_cuda(rc, what);
    if (Clock::now() > until) {
      abort(what + " did not complete within " + seconds(timeout_) + " (timeout_seconds)");
      throw_if_aborted();
    }
    back_off(round);
  }
}

// Every 20 ms: retire finished collectives, abort on an asynchronous NCCL
// error or on the oldest unfinished collective passing the timeout (counted
// from its enqueue, so it includes the compute queued before it).
void NcclComm::watchdog() {
  cudaSetDevice(device_);
  std::unique_lock<std::mutex> lock(pending_mutex_);
  while (!stop_ && !aborted_) {
    wake_.wait_for(lock, std::chrono::milliseconds(20));
    while (!pending_.empty() && cudaEventQuery(pending_.front().event) == cudaSuccess) {
      spare_events_.push_back(pending_.front().event);
      pending_.pop_front();
    }
    std::string reason;
    ncclResult_t async = ncclSuccess;
    {
      std::lock_guard<std::mutex> call(call_mutex_);  // the comm is alive while held
      if (aborted_) break;
      if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess) async = ncclSuccess;
      for (const std::vector<Lane>* lanes : {&to_, &from_})
        for (const Lane& lane : *lanes)
          if (async == ncclSuccess && lane.comm != nullptr &&
              ncclCommGetAsyncError(lane.comm, &async) != ncclSuccess)
            async = ncclSuccess;
    }
    if (async != ncclSuccess && async != ncclInProgress)
      reason = std::string("asynchronous NCCL error: ") + ncclGetErrorString(async);
    else if (!pending_.empty()) {
      const double waited = std::chrono::duration<double>(Clock::now() - pending_.front().enqueued).count();
      if (waited > timeout_) reason = pending_.front().what + " did not complete within " + seconds(waited);
    }
    if (!reason.empty()) {
      lock.unlock();
      abort(reason);
      lock.lock();
    }
  }
}

void NcclComm::allreduce(const void* send, void* recv, size_t count, tdm_dtype dtype, tdm_reduce_op op,
                         void* stream) {
  const ncclDataType_t t = type_of(dtype);
  const ncclRedOp_t o = op_of(op);
  ++seq_;
  collective(describe("allreduce", count, dtype, reduce_op_name(op)), stream,
             [&](cudaStream_t s) { return ncclAllReduce(send, recv, count, t, o, comm_, s); });
}

void NcclComm::allgather(const void* send, void* recv, size_t send_count, tdm_dtype dtype, void* stream) {
  const ncclDataType_t t = type_of(dtype);
  ++seq_;
  collective(describe("allgather", send_count, dtype, nullptr), stream,
             [&](cudaStream_t s) { return ncclAllGather(send, recv, send_count, t, comm_, s); });
}

void NcclComm::reduce_scatter(const void* send, void* recv, size_t recv_count, tdm_dtype dtype,
                              tdm_reduce_op op, void* stream) {
  const ncclDataType_t t = type_of(dtype);
  const ncclRedOp_t o = op_of(op);
  ++seq_;
  collective(describe("reduce_scatter", recv_count, dtype, reduce_op_name(op)), stream,
             [&](cudaStream_t s) { return ncclReduceScatter(send, recv, recv_count, t, o, comm_, s); });
}

void NcclComm::broadcast(void* buffer, size_t count, tdm_dtype dtype, int32_t root, void* stream) {
  const ncclDataType_t t = type_of(dtype);
  if (root < 0 || root >= size_)
    throw Error(TDM_INVALID_ARGUMENT, "nccl: broadcast root " + std::to_string(root) + " is not a rank of " +
                                          std::to_string(size_));
  ++seq_;
  collective(describe("broadcast", count, dtype, nullptr), stream,
             [&](cudaStream_t s) { return ncclBroadcast(buffer, buffer, count, t, root, comm_, s); });
}

// A 1-element allreduce on the plugin's stream, waited for: no rank leaves
// before every rank has entered.
void NcclComm::barrier() {
  ++seq_;
  collective("barrier #" + std::to_string(seq_), nullptr, [&](cudaStream_t s) {
    return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, s);
  });
}

}  // namespace tandem::nccl
