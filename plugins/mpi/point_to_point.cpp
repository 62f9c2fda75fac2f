// MPI comm plugin — send and recv (ABI 1.15), for pipeline parallelism.
//
// The host sends from one thread and receives on another at the same time,
// and MPI may have granted less than MPI_THREAD_MULTIPLE: each transfer is
// posted non-blocking and completed by a polling loop that holds the MPI
// lock only per call, so neither direction can block the other. MPI keeps
// the order of messages between two ranks on one communicator and tag,
// which is the order the ABI promises.
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

template <class Start>
void MpiComm::exchange(const char* what, size_t count, tdm_dtype dtype, int32_t peer, Start start) {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw Error(TDM_INVALID_ARGUMENT, std::string("mpi: ") + what + " with rank " + std::to_string(peer) +
                                          ", which is not another rank of this communicator of " +
                                          std::to_string(size_));
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

}  // namespace tandem::mpi
