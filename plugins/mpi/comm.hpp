// MPI comm plugin — one communicator: a duplicate of MPI_COMM_WORLD with
// MPI_ERRORS_RETURN, plus a second duplicate ("probe") used only after a
// timeout to ask the other ranks where they are.
//
// With timeout_seconds > 0 every collective is started non-blocking
// (MPI_Iallreduce, ...) and completed by an MPI_Test loop with a deadline;
// with 0 the blocking call is used. A timed-out collective cannot be
// cancelled (MPI has no cancel for collectives), so the communicator is
// marked broken and keeps its request; later calls fail with TDM_ABORTED.
#ifndef TANDEM_MPI_COMM_HPP
#define TANDEM_MPI_COMM_HPP

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tandem/tandem.hpp"

namespace tandem::mpi {

// What a collective call is, for messages.
struct Call {
  const char* name;
  size_t count;
  tdm_dtype dtype;
  const char* op;  // "SUM", ... or nullptr
  uint64_t seq;    // position in this communicator's sequence of collectives
};

MPI_Datatype mpi_type(tdm_dtype dtype);      // throws Unsupported-like Error for unknown
MPI_Op mpi_op(tdm_reduce_op op, tdm_dtype);  // AVG -> SUM (scaled afterwards)

class MpiComm final : public Communicator {
 public:
  explicit MpiComm(const tdm_comm_init_info& info);
  ~MpiComm() override;

  void allreduce(const void* send, void* recv, size_t count, tdm_dtype dtype, tdm_reduce_op op,
                 void* stream) override;
  void allgather(const void* send, void* recv, size_t send_count, tdm_dtype dtype, void* stream) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, tdm_dtype dtype, tdm_reduce_op op,
                      void* stream) override;
  void broadcast(void* buffer, size_t count, tdm_dtype dtype, int32_t root, void* stream) override;
  void barrier() override;
  // Point to point (point_to_point.cpp): on a communicator of their own,
  // non-blocking calls completed by a polling loop, so that a send and a
  // recv of one rank's threads progress together at any thread level.
  void send(const void* buffer, size_t count, tdm_dtype dtype, int32_t peer, void* stream) override;
  void recv(void* buffer, size_t count, tdm_dtype dtype, int32_t peer, void* stream) override;
  // The same started and left to run (ABI 1.16): the host's thread that
  // computes posts them and, by testing them, lets MPI progress them, so
  // that no thread of its own waits for a core to poll on.
  tdm_comm_request* send_start(const void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                               void* stream) override;
  tdm_comm_request* recv_start(void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                               void* stream) override;
  bool request_test(tdm_comm_request* request) override;

 private:
  // A started send or recv: its MPI requests, one per chunk.
  struct Transfer {
    std::vector<MPI_Request> parts;
  };
  using Clock = std::chrono::steady_clock;
  // A reply to a peer's "where are you?", kept until MPI has sent it.
  struct Reply {
    int64_t payload[2];
    MPI_Request request = MPI_REQUEST_NULL;
  };

  Call begin(const char* name, size_t count, tdm_dtype dtype, const char* op);
  // Runs one collective: `blocking()` without a timeout, else `start(&req)`
  // and the polling loop. Both return an MPI error code.
  template <class Blocking, class Start>
  void run(const Call& call, Blocking blocking, Start start);
  void wait(MPI_Request& request, const Call& call);
  void answer_queries();
  [[noreturn]] void fail_timeout(const Call& call, Clock::time_point started);
  std::string describe(const Call& call) const;
  void scale_average(void* data, size_t count, tdm_dtype dtype) const;
  // One point-to-point transfer, `start` posting it (point_to_point.cpp).
  template <class Start>
  void exchange(const char* what, size_t count, tdm_dtype dtype, int32_t peer, Start start);
  // Posts a transfer's messages (one per kChunk elements) without waiting.
  template <class Start>
  std::unique_ptr<Transfer> start(const char* what, size_t count, tdm_dtype dtype, int32_t peer, Start start);
  void check_peer(const char* what, int32_t peer) const;

  // A rank of this communicator as the run's launcher numbers it (the
  // communicator may be one group of the run's processes: ABI 1.10's
  // tdm_comm_init_info.group).
  std::string rank_name(int rank) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm probe_ = MPI_COMM_NULL;
  MPI_Comm p2p_ = MPI_COMM_NULL;  // send/recv only: never matched against the probe's messages
  int rank_ = 0;
  int size_ = 1;
  int run_size_ = 1;            // every process of the run
  std::vector<int> run_ranks_;  // this communicator's rank r is the run's run_ranks_[r]
  int local_rank_ = 0;
  double timeout_ = 0.0;
  uint64_t seq_ = 0;
  bool broken_ = false;
  std::string broken_reason_;
  MPI_Request stranded_ = MPI_REQUEST_NULL;  // the timed-out collective, never completed
  std::vector<std::unique_ptr<Reply>> replies_;
  std::vector<std::unique_ptr<Transfer>> transfers_;  // started, not yet finished
};

}  // namespace tandem::mpi

#endif
