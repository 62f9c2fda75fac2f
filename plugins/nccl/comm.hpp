// NCCL comm plugin — one communicator on one GPU.
//
// Collectives are enqueued on the caller's cudaStream_t and return at once
// (stream NULL: the plugin's own stream, and the call waits for completion).
// With timeout_seconds > 0 the communicator is created non-blocking
// (ncclConfig_t.blocking = 0), so no NCCL call can block the caller longer
// than the timeout, and a watchdog thread records a CUDA event after each
// collective and polls it and ncclCommGetAsyncError; a collective still
// unfinished after timeout_seconds, or an asynchronous NCCL error, makes it
// call ncclCommAbort (the stuck kernels exit, the streams' work fails) and
// every later call returns TDM_TIMEOUT with the reason.
//
// On a communicator created with point_to_point (ABI 1.17) it also sends
// and receives point to point (point_to_point.cpp): each ordered pair of
// ranks gets a communicator and a stream of its own (the lanes below), so
// that a receive started early never holds back a send; the watchdog and
// the abort cover the lanes too.
#ifndef TANDEM_NCCL_COMM_HPP
#define TANDEM_NCCL_COMM_HPP

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl_library.hpp"
#include "tandem/tandem.hpp"

namespace tandem::nccl {

[[noreturn]] void fail_cuda(cudaError_t rc, const std::string& what);
void check_cuda(cudaError_t rc, const std::string& what);
ncclDataType_t type_of(tdm_dtype dtype);
// Throws naming `what` unless `rc` is ncclSuccess or ncclInProgress (a
// non-blocking communicator's call, settled later).
void check_nccl(ncclResult_t rc, const std::string& what);

class NcclComm final : public Communicator {
 public:
  explicit NcclComm(const tdm_comm_init_info& info);
  ~NcclComm() override;

  void allreduce(const void* send, void* recv, size_t count, tdm_dtype dtype, tdm_reduce_op op,
                 void* stream) override;
  void allgather(const void* send, void* recv, size_t send_count, tdm_dtype dtype, void* stream) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, tdm_dtype dtype, tdm_reduce_op op,
                      void* stream) override;
  void broadcast(void* buffer, size_t count, tdm_dtype dtype, int32_t root, void* stream) override;
  void barrier() override;
  // Point to point (point_to_point.cpp), on a communicator created with
  // tdm_comm_init_info.point_to_point.
  tdm_comm_request* send_start(const void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                               void* stream) override;
  tdm_comm_request* recv_start(void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                               void* stream) override;
  bool request_test(tdm_comm_request* request) override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    cudaEvent_t event;
    std::string what;
    Clock::time_point enqueued;
  };

  // The CUDA and NCCL resources; the constructor frees them if this throws.
  void open(const tdm_comm_init_info& info);
  // Events, the barrier's scratch element and the plugin's stream.
  void release_cuda();
  // One wait of a polling loop (`round` counts them).
  static void back_off(int& round);
  // Enqueues one NCCL call (a lambda taking the cudaStream_t) with the
  // timeout machinery around it.
  template <class Enqueue>
  void collective(const std::string& what, void* stream, Enqueue enqueue);
  // Waits for a non-blocking communicator's last call to leave ncclInProgress.
  void settle(ncclResult_t rc, const std::string& what, Clock::time_point deadline);
  void wait_stream(cudaStream_t stream, const std::string& what);
  void track(cudaStream_t stream, const std::string& what);
  void watchdog();
  // Aborts the communicator once; later calls fail with `reason`.
  // abort_locked: the caller holds call_mutex_ (or is the only thread).
  void abort(const std::string& reason);
  void abort_locked(const std::string& reason);
  void throw_if_aborted() const;
  Clock::time_point deadline() const;
  std::string describe(const char* name, size_t count, tdm_dtype dtype, const char* op) const;

  // NCCL runs a communicator's sends and receives one after another, so a
  // receive started early on comm_ would hold back every later send. Each
  // ordered pair of ranks gets a communicator of its own instead (the
  // sender is its rank 0), split off while every rank is in comm_create,
  // with a stream of its own: the messages from one rank to another form
  // one queue that the receiver takes in order, and no queue waits on
  // another's. `comm_` is the communicator they were split from.
  struct Lane {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
  };
  struct Transfer {
    cudaEvent_t done = nullptr;  // recorded on the lane's stream after the send or receive
    std::string what;
  };
  void open_lanes(ncclConfig_t config);
  void connect_lanes();
  // Every lane finalized and destroyed, or aborted (`abort`).
  void close_lanes(bool abort);
  tdm_comm_request* start_transfer(bool sending, void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                                   void* stream);
  // Waits (polling, with the deadline) for a call on `comm` to settle.
  void settle_on(ncclComm_t comm, ncclResult_t rc, const std::string& what, Clock::time_point until);

  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  int rank_ = 0;
  int size_ = 1;
  double timeout_ = 0.0;
  uint64_t seq_ = 0;
  cudaStream_t own_stream_ = nullptr;  // for stream == NULL and barrier
  float* scratch_ = nullptr;           // barrier's one element

  std::mutex call_mutex_;  // one NCCL call or ncclCommAbort at a time
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;  // written once before aborted_ is set

  std::mutex pending_mutex_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> spare_events_;
  bool stop_ = false;
  std::thread watchdog_;

  std::vector<Lane> to_, from_;                       // by peer: the lane this rank sends on, and receives on
  std::vector<std::unique_ptr<Transfer>> transfers_;  // started, not yet finished
};

}  // namespace tandem::nccl

#endif
