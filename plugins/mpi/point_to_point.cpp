// MPI comm plugin — point to point, for pipeline parallelism: send and
// recv (ABI 1.15), send_start, recv_start and request_test (ABI 1.16).
//
// A host of ABI 1.15 sends from one thread and receives on another at the
// same time, and MPI may have granted less than MPI_THREAD_MULTIPLE: each
// transfer is posted non-blocking and completed by a polling loop that
// holds the MPI lock only per call, so neither direction can block the
// other. A host of 1.16 posts and tests the transfers itself. MPI keeps
// the order of messages between two ranks on one communicator and tag,
// which is the order the ABI promises, whichever of the calls posted them.
#include <algorithm>
#include <string>

#include "comm.hpp"
#include "runtime.hpp"

namespace tandem::mpi {
namespace {

constexpr int kTagPointToPoint = 0;
// MPI 3.1's counts are ints: larger buffers go as several messages, which
// both ends split the same way.
constexpr size_t kChunk = size_t(1) << 30;

}  // namespace

void MpiComm::check_peer(const char* what, int32_t peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw Error(TDM_INVALID_ARGUMENT, std::string("mpi: ") + what + " with rank " + std::to_string(peer) +
                                          ", which is not another rank of this communicator of " +
                                          std::to_string(size_));
}

template <class Start>
void MpiComm::exchange(const char* what, size_t count, tdm_dtype dtype, int32_t peer, Start start) {
  check_peer(what, peer);
  const MPI_Datatype type = mpi_type(dtype);
  const size_t elem = dtype_size(dtype);
  for (size_t at = 0; at < count || at == 0; at += kChunk) {
    const size_t n = std::min(kChunk, count - at);
    MPI_Request request = MPI_REQUEST_NULL;
    {
      auto lock = serial();
      const int rc = start(at * elem, static_cast<int>(n), type, &request);
      if (rc != MPI_SUCCESS)
        throw Error(TDM_INTERNAL, std::string("mpi: starting ") + what + " failed: " + mpi_error_text(rc));
    }
    const Clock::time_point started = Clock::now();
    const auto deadline =
        started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
    for (uint64_t spin = 0;; ++spin) {
      int done = 0;
      {
        auto lock = serial();
        const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
          throw Error(TDM_INTERNAL, std::string("mpi: ") + what + " failed: " + mpi_error_text(rc));
      }
      if (done) break;
      pause_between_polls(Clock::now() - started);
      if (timeout_ > 0 && (spin & 255) == 0 && Clock::now() > deadline) {
        // The request stays with MPI (a cancelled send may still match);
        // the host stops the run on this error.
        throw Error(TDM_TIMEOUT, std::string("mpi: ") + what + " of " + std::to_string(count) + " x " +
                                     dtype_name(dtype) + " on rank " + rank_name(rank_) + " waited " +
                                     std::to_string(int(timeout_)) + " s for rank " + rank_name(peer) +
                                     " (the timeout, --comm-timeout): it is stuck, dead, or computing");
      }
    }
    if (count == 0) break;
  }
}

void MpiComm::send(const void* buffer, size_t count, tdm_dtype dtype, int32_t peer, void*) {
  exchange("send", count, dtype, peer, [&](size_t offset, int n, MPI_Datatype type, MPI_Request* q) {
    return MPI_Isend(static_cast<const char*>(buffer) + offset, n, type, peer, kTagPointToPoint, p2p_, q);
  });
}

void MpiComm::recv(void* buffer, size_t count, tdm_dtype dtype, int32_t peer, void*) {
  exchange("recv", count, dtype, peer, [&](size_t offset, int n, MPI_Datatype type, MPI_Request* q) {
    return MPI_Irecv(static_cast<char*>(buffer) + offset, n, type, peer, kTagPointToPoint, p2p_, q);
  });
}

template <class Start>
std::unique_ptr<MpiComm::Transfer> MpiComm::start(const char* what, size_t count, tdm_dtype dtype,
                                                  int32_t peer, Start start) {
  check_peer(what, peer);
  const MPI_Datatype type = mpi_type(dtype);
  const size_t elem = dtype_size(dtype);
  auto transfer = std::make_unique<Transfer>();
  auto lock = serial();
  for (size_t at = 0; at < count || at == 0; at += kChunk) {
    const size_t n = std::min(kChunk, count - at);
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = start(at * elem, static_cast<int>(n), type, &request);
    if (rc != MPI_SUCCESS) {
      // The chunks already posted are left to MPI: the host ends the run on this error.
      for (MPI_Request& q : transfer->parts) MPI_Request_free(&q);
      throw Error(TDM_INTERNAL, std::string("mpi: starting ") + what + " failed: " + mpi_error_text(rc));
    }
    transfer->parts.push_back(request);
    if (count == 0) break;
  }
  return transfer;
}

tdm_comm_request* MpiComm::send_start(const void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                                      void*) {
  auto transfer =
      start("send", count, dtype, peer, [&](size_t offset, int n, MPI_Datatype type, MPI_Request* q) {
        return MPI_Isend(static_cast<const char*>(buffer) + offset, n, type, peer, kTagPointToPoint, p2p_, q);
      });
  transfers_.push_back(std::move(transfer));
  return reinterpret_cast<tdm_comm_request*>(transfers_.back().get());
}

tdm_comm_request* MpiComm::recv_start(void* buffer, size_t count, tdm_dtype dtype, int32_t peer, void*) {
  auto transfer =
      start("recv", count, dtype, peer, [&](size_t offset, int n, MPI_Datatype type, MPI_Request* q) {
        return MPI_Irecv(static_cast<char*>(buffer) + offset, n, type, peer, kTagPointToPoint, p2p_, q);
      });
  transfers_.push_back(std::move(transfer));
  return reinterpret_cast<tdm_comm_request*>(transfers_.back().get());
}

bool MpiComm::request_test(tdm_comm_request* request) {
  auto* transfer = reinterpret_cast<Transfer*>(request);
  auto it =
      std::find_if(transfers_.begin(), transfers_.end(), [&](const auto& t) { return t.get() == transfer; });
  if (it == transfers_.end())
    throw Error(TDM_INVALID_ARGUMENT,
                "mpi: request_test of a request this communicator did not start, or "
                "one already finished");
  int done = 0;
  int rc = MPI_SUCCESS;
  {
    auto lock = serial();
    rc = MPI_Testall(int(transfer->parts.size()), transfer->parts.data(), &done, MPI_STATUSES_IGNORE);
  }
  if (rc != MPI_SUCCESS) {
    transfers_.erase(it);
    throw Error(TDM_INTERNAL, std::string("mpi: a point-to-point transfer failed: ") + mpi_error_text(rc));
  }
  if (done) transfers_.erase(it);
  return done != 0;
}

}  // namespace tandem::mpi
