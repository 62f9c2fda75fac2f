// NCCL comm plugin — point to point, for pipeline parallelism:
// send_start, recv_start and request_test (ABI 1.16) on lanes, one
// communicator per ordered pair of ranks (comm.hpp says why), made when
// the host creates the communicator with point_to_point (ABI 1.17).
//
// A transfer is enqueued on its lane's stream (after the caller's stream,
// when one is given, without blocking it) and an event recorded behind it;
// request_test asks that event. The lane's stream never holds the caller's
// compute: the host hands a send's buffer over once the value is made, and
// reads a receive's once request_test said it arrived.
#include <algorithm>
#include <string>
#include <utility>

#include "comm.hpp"
#include "nccl_types.hpp"

namespace tandem::nccl {

void NcclComm::open_lanes(ncclConfig_t config) {
  to_.assign(size_t(size_), Lane{});
  from_.assign(size_t(size_), Lane{});
  // Every rank runs every split, in the same order; the two ranks of a
  // pair join it (the sender as its rank 0), the others pass NOCOLOR.
  for (int a = 0; a < size_; ++a)
    for (int b = 0; b < size_; ++b) {
      if (a == b) continue;
      const bool member = rank_ == a || rank_ == b;
      ncclComm_t lane = nullptr;
      const std::string what =
          "ncclCommSplit (the lane from rank " + std::to_string(a) + " to rank " + std::to_string(b) + ")";
      const ncclResult_t rc =
          ncclCommSplit(comm_, member ? 0 : NCCL_SPLIT_NOCOLOR, rank_ == a ? 0 : 1, &lane, &config);
      settle_on(lane != nullptr ? lane : comm_, rc, what, deadline());
      if (!member) continue;
      Lane& mine = rank_ == a ? to_[size_t(b)] : from_[size_t(a)];
      mine.comm = lane;
      check_cuda(cudaStreamCreateWithFlags(&mine.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    }
  connect_lanes();
}

// NCCL connects two ranks on their first send and receive, a handshake in
// which the host's call waits for the peer's. A stage that starts its
// receives a window ahead would wait there for a peer that computes first,
// and that one for it. So every lane carries one element each way now,
// in one group, while every rank is in comm_create.
void NcclComm::connect_lanes() {
  float* scratch = nullptr;
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&scratch), 2 * size_t(size_) * sizeof(float)), "cudaMalloc");
  try {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      check_nccl(
          ncclSend(scratch + peer, 1, ncclFloat32, 1, to_[size_t(peer)].comm, to_[size_t(peer)].stream),
          "ncclSend");
      check_nccl(ncclRecv(scratch + size_ + peer, 1, ncclFloat32, 0, from_[size_t(peer)].comm,
                          from_[size_t(peer)].stream),
                 "ncclRecv");
    }
    const ncclResult_t ended = ncclGroupEnd();
    for (const std::vector<Lane>* lanes : {&to_, &from_})
      for (const Lane& lane : *lanes)
        if (lane.comm != nullptr) {
          settle_on(lane.comm, ended, "connecting the lanes (ncclGroupEnd)", deadline());
          wait_stream(lane.stream, "connecting the lanes");
        }
  } catch (...) {
    cudaFree(scratch);
    throw;
  }
  cudaFree(scratch);
}

void NcclComm::close_lanes(bool abort) {
  for (std::vector<Lane>* lanes : {&to_, &from_})
    for (Lane& lane : *lanes) {
      if (lane.comm != nullptr && !abort && !aborted_) {
        try {
          settle_on(lane.comm, ncclCommFinalize(lane.comm), "ncclCommFinalize of a lane", deadline());
          ncclCommDestroy(std::exchange(lane.comm, nullptr));
        } catch (const Error& e) {  // a timeout aborted every lane already
          Host::log(TDM_LOG_WARNING, e.what());
        }
      }
      if (lane.comm != nullptr) ncclCommAbort(std::exchange(lane.comm, nullptr));
      if (lane.stream != nullptr) cudaStreamDestroy(std::exchange(lane.stream, nullptr));
    }
  for (const auto& t : transfers_) cudaEventDestroy(t->done);
  transfers_.clear();
}

tdm_comm_request* NcclComm::start_transfer(bool sending, void* buffer, size_t count, tdm_dtype dtype,
                                           int32_t peer, void* stream) {
  const char* name = sending ? "send" : "recv";
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw Error(TDM_INVALID_ARGUMENT, std::string("nccl: ") + name + " with rank " + std::to_string(peer) +
                                          ", which is not another rank of this communicator of " +
                                          std::to_string(size_));
  if (to_.empty())
    throw Error(TDM_UNSUPPORTED, std::string("nccl: ") + name +
                                     " on a communicator created without point_to_point "
                                     "(tdm_comm_init_info, ABI 1.17): the host says so at comm_create");
  const ncclDataType_t t = type_of(dtype);
  const Lane& lane = sending ? to_[size_t(peer)] : from_[size_t(peer)];
  ++seq_;
  auto transfer = std::make_unique<Transfer>();
  transfer->what = describe(sending ? "send" : "recv", count, dtype, nullptr) + (sending ? " to" : " from") +
                   " rank " + std::to_string(peer);
  {
    std::lock_guard<std::mutex> lock(call_mutex_);
    throw_if_aborted();
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    check_cuda(cudaEventCreateWithFlags(&transfer->done, cudaEventDisableTiming), "cudaEventCreate");
    try {
      if (stream != nullptr) {  // after what the caller queued there, without holding its stream
        check_cuda(cudaEventRecord(transfer->done, static_cast<cudaStream_t>(stream)), "cudaEventRecord");
        check_cuda(cudaStreamWaitEvent(lane.stream, transfer->done, 0), "cudaStreamWaitEvent");
      }
      // The sender is rank 0 of its lane, the receiver rank 1.
      settle_on(lane.comm,
                sending ? ncclSend(buffer, count, t, 1, lane.comm, lane.stream)
                        : ncclRecv(buffer, count, t, 0, lane.comm, lane.stream),
                transfer->what, deadline());
      check_cuda(cudaEventRecord(transfer->done, lane.stream), "cudaEventRecord");
    } catch (...) {
      cudaEventDestroy(transfer->done);
      throw;
    }
  }
  if (timeout_ > 0) track(lane.stream, transfer->what);
  transfers_.push_back(std::move(transfer));
  return reinterpret_cast<tdm_comm_request*>(transfers_.back().get());
}

tdm_comm_request* NcclComm::send_start(const void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                                       void* stream) {
  return start_transfer(true, const_cast<void*>(buffer), count, dtype, peer, stream);
}

tdm_comm_request* NcclComm::recv_start(void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                                       void* stream) {
  return start_transfer(false, buffer, count, dtype, peer, stream);
}

bool NcclComm::request_test(tdm_comm_request* request) {
  auto* transfer = reinterpret_cast<Transfer*>(request);
  auto it =
      std::find_if(transfers_.begin(), transfers_.end(), [&](const auto& t) { return t.get() == transfer; });
  if (it == transfers_.end())
    throw Error(TDM_INVALID_ARGUMENT,
                "nccl: request_test of a request this communicator did not start, or one already finished");
  const cudaError_t rc = aborted_ ? cudaErrorNotReady : cudaEventQuery(transfer->done);
  if (rc == cudaErrorNotReady && !aborted_) return false;
  const std::string what = transfer->what;
  cudaEventDestroy(transfer->done);
  transfers_.erase(it);  // finished or failed: released either way
  throw_if_aborted();
  check_cuda(rc, what);
  return true;
}

}  // namespace tandem::nccl
