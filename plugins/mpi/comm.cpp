// MPI comm plugin — the collectives, the timeout loop and the post-mortem
// that names the ranks which did not arrive.
#include "comm.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <mutex>
#include <thread>
#include <type_traits>

#include "half.hpp"
#include "runtime.hpp"

namespace tandem::mpi {

namespace {

constexpr int kTagQuery = 1;  // probe comm: "which collective are you in?"
constexpr int kTagReply = 2;  // probe comm: {query id, my sequence number}
// Per-call element limit of MPI 3.1's int counts; allreduce and broadcast
// are element-wise, so they are split into chunks of this many elements.
constexpr size_t kChunk = size_t(1) << 30;

int as_int(size_t count, const char* what) {
  if (count > size_t(INT_MAX))
    throw Error(TDM_INVALID_ARGUMENT,
                std::string(what) + ": " + std::to_string(count) +
                    " elements exceed MPI's int count limit (2^31-1); split the buffer");
  return static_cast<int>(count);
}

// AVG = SUM then divide by the world size; integers truncate toward zero.
template <class T>
void divide(void* data, size_t count, int world) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_integral_v<T>)
      p[i] = static_cast<T>(static_cast<int64_t>(p[i]) / world);
    else
      p[i] = static_cast<T>(p[i] / static_cast<T>(world));
  }
}

template <float (*ToF32)(uint16_t), uint16_t (*FromF32)(float)>
void divide16(void* data, size_t count, float n) {
  auto* p = static_cast<uint16_t*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = FromF32(ToF32(p[i]) / n);
}

}  // namespace

MPI_Datatype mpi_type(tdm_dtype dtype) {
  switch (dtype) {
    case TDM_F32:
      return MPI_FLOAT;
    case TDM_F64:
      return MPI_DOUBLE;
    case TDM_F16:
      return runtime().f16;
    case TDM_BF16:
      return runtime().bf16;
    case TDM_S8:
      return MPI_INT8_T;
    case TDM_U8:
      return MPI_UINT8_T;
    case TDM_S32:
      return MPI_INT32_T;
    case TDM_S64:
      return MPI_INT64_T;
    default:
      throw Error(TDM_UNSUPPORTED, "mpi: dtype " + std::to_string(dtype) + " is not supported");
  }
}

MPI_Op mpi_op(tdm_reduce_op op, tdm_dtype dtype) {
  const bool half = dtype == TDM_F16 || dtype == TDM_BF16;
  switch (op) {
    case TDM_REDUCE_SUM:
    case TDM_REDUCE_AVG:
      return half ? runtime().sum16 : MPI_SUM;
    case TDM_REDUCE_MAX:
      return half ? runtime().max16 : MPI_MAX;
    case TDM_REDUCE_MIN:
      return half ? runtime().min16 : MPI_MIN;
    default:
      throw Error(TDM_UNSUPPORTED, "mpi: reduce op " + std::to_string(op) + " is not supported");
  }
}

namespace {

// Each rank of `comm` as MPI_COMM_WORLD numbers it, for messages that name
// ranks the way the launcher does.
std::vector<int> ranks_in_the_run(MPI_Comm comm, int size) {
  MPI_Group mine = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(comm, &mine), "MPI_Comm_group");
  check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &all), "MPI_Comm_group(MPI_COMM_WORLD)");
  std::vector<int> ours(size_t(size), 0), theirs(size_t(size), 0);
  for (int r = 0; r < size; ++r) ours[size_t(r)] = r;
  check_mpi(MPI_Group_translate_ranks(mine, size, ours.data(), all, theirs.data()),
            "MPI_Group_translate_ranks");
  MPI_Group_free(&mine);
  MPI_Group_free(&all);
  return theirs;
}

}  // namespace

MpiComm::MpiComm(const tdm_comm_init_info& info) {
  if (!TDM_STRUCT_HAS(&info, tdm_comm_init_info, local_rank))
    throw Error(TDM_INVALID_ARGUMENT,
                "mpi: tdm_comm_init_info too small (struct_size " + std::to_string(info.struct_size) + ")");
  runtime_init();  // no-op when init already ran
  auto lock = serial();
  int world_rank = 0, world_size = 1;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size), "MPI_Comm_size");
  // The processes of one group (ABI 1.10; one group before) form this
  // communicator, in the launcher's order, which the host's numbering
  // within a group must match (checked below).
  const int group = TDM_STRUCT_HAS(&info, tdm_comm_init_info, group) ? info.group : 0;
  if (group < 0) throw Error(TDM_INVALID_ARGUMENT, "mpi: group " + std::to_string(group) + " is negative");
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, group, world_rank, &comm_), "MPI_Comm_split");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  // A negative rank / non-positive size means "take MPI's".
  if ((info.rank >= 0 && info.rank != rank_) || (info.world_size > 0 && info.world_size != size_)) {
    MPI_Comm_free(&comm_);
    const std::string in_group =
        group != 0 || size_ != world_size ? " in group " + std::to_string(group) : "";
    throw Error(TDM_INVALID_ARGUMENT,
                "mpi: the host asked for rank " + std::to_string(info.rank) + " of " +
                    std::to_string(info.world_size) + in_group + " but MPI says this process is rank " +
                    std::to_string(rank_) + " of " + std::to_string(size_) + in_group + " (rank " +
                    std::to_string(world_rank) + " of " + std::to_string(world_size) +
                    " in all); launch every process with one mpirun/srun (e.g. `mpirun -np " +
                    std::to_string(info.world_size) + " tandem ...`) and let the launcher set the ranks");
  }
  run_size_ = world_size;
  run_ranks_ = ranks_in_the_run(comm_, size_);
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_dup(comm_, &probe_), "MPI_Comm_dup(probe)");
  check_mpi(MPI_Comm_dup(comm_, &p2p_), "MPI_Comm_dup(point to point)");
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_free(&node);
  if (info.local_rank >= 0 && info.local_rank != local_rank_)
    Host::log(TDM_LOG_WARNING, "mpi: host local rank " + std::to_string(info.local_rank) +
                                   " differs from MPI's node-local rank " + std::to_string(local_rank_));
  if (TDM_STRUCT_HAS(&info, tdm_comm_init_info, timeout_seconds) && info.timeout_seconds > 0)
    timeout_ = info.timeout_seconds;
}

MpiComm::~MpiComm() {
  auto lock = serial();
  for (auto& r : replies_)
    if (r->request != MPI_REQUEST_NULL) MPI_Request_free(&r->request);
  // A broken communicator still has the stranded collective, and one with
  // point-to-point transfers unfinished their requests: freeing it would
  // wait for peers that never come. Those and the buffers MPI may still
  // read are left to process exit.
  if (broken_ || !transfers_.empty()) {
    for (auto& r : replies_) (void)r.release();
    for (auto& t : transfers_) (void)t.release();
    return;
  }
  if (p2p_ != MPI_COMM_NULL) MPI_Comm_free(&p2p_);
  if (probe_ != MPI_COMM_NULL) MPI_Comm_free(&probe_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Call MpiComm::begin(const char* name, size_t count, tdm_dtype dtype, const char* op) {
  if (broken_)
    throw Error(TDM_ABORTED, std::string("mpi: ") + name + " refused: this communicator is unusable since " +
                                 broken_reason_);
  return Call{name, count, dtype, op, ++seq_};
}

std::string MpiComm::describe(const Call& c) const {
  std::string s = c.name;
  s += " #" + std::to_string(c.seq) + " (" + std::to_string(c.count) + " x " + dtype_name(c.dtype);
  if (c.op != nullptr) s += std::string(", ") + c.op;
  s += ") on rank " + rank_name(rank_) + " of " + std::to_string(run_size_);
  if (size_ != run_size_)
    s += " (rank " + std::to_string(rank_) + " of the " + std::to_string(size_) + " in its group)";
  return s;
}

std::string MpiComm::rank_name(int rank) const {
  return std::to_string(run_ranks_[size_t(rank)]);
}

template <class Blocking, class Start>
void MpiComm::run(const Call& call, Blocking blocking, Start start) {
  if (timeout_ <= 0) {
    auto lock = serial();
    const int rc = blocking();
    if (rc != MPI_SUCCESS)
      throw Error(TDM_INTERNAL, "mpi: " + describe(call) + " failed: " + mpi_error_text(rc));
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  {
    auto lock = serial();
    const int rc = start(&request);
    if (rc != MPI_SUCCESS)
      throw Error(TDM_INTERNAL, "mpi: starting " + describe(call) + " failed: " + mpi_error_text(rc));
  }
  wait(request, call);
}

void MpiComm::wait(MPI_Request& request, const Call& call) {
  const Clock::time_point started = Clock::now();
  const auto deadline =
      started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  // Open MPI progresses non-blocking collectives only inside MPI calls: a
  // tight MPI_Test loop while a collective is young (most finish within
  // milliseconds), then short sleeps, so that a rank waiting out the timeout
  // for a dead peer does not hold a core at 100%.
  for (uint64_t spin = 0;; ++spin) {
    int done = 0;
    {
      auto lock = serial();
      const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS)
        throw Error(TDM_INTERNAL, "mpi: " + describe(call) + " failed: " + mpi_error_text(rc));
      if (done) return;
      if ((spin & 255) == 0) answer_queries();
    }
    // Let a compute thread of this rank run between polls: the data-parallel
    // trainer all-reduces on its own thread while backward continues.
    pause_between_polls(Clock::now() - started);
    if ((spin & 255) == 0 && Clock::now() > deadline) {
      stranded_ = request;
      fail_timeout(call, started);
    }
  }
}

// Answers peers that timed out and ask where this rank is. Called only
// from inside a collective's polling loop, so the answer is always "in
// collective #seq_"; a rank that never answers is dead, hung, or computing.
void MpiComm::answer_queries() {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagQuery, probe_, &flag, &status) != MPI_SUCCESS || !flag) break;
    int64_t query = 0;
    if (MPI_Recv(&query, 1, MPI_INT64_T, status.MPI_SOURCE, kTagQuery, probe_, MPI_STATUS_IGNORE) !=
        MPI_SUCCESS)
      break;
    auto reply = std::make_unique<Reply>();
    reply->payload[0] = query;
    reply->payload[1] = static_cast<int64_t>(seq_);
    MPI_Isend(reply->payload, 2, MPI_INT64_T, status.MPI_SOURCE, kTagReply, probe_, &reply->request);
    replies_.push_back(std::move(reply));
  }
  // Forget replies MPI has sent.
  for (auto it = replies_.begin(); it != replies_.end();) {
    int done = 0;
    MPI_Test(&(*it)->request, &done, MPI_STATUS_IGNORE);
    it = done ? replies_.erase(it) : it + 1;
  }
}

void MpiComm::fail_timeout(const Call& call, Clock::time_point started) {
  const double waited = std::chrono::duration<double>(Clock::now() - started).count();
  broken_ = true;
  runtime().timed_out = true;
  // Post-mortem: ask every other rank which collective it is in, and listen
  // for a short window (answering their questions meanwhile).
  std::vector<int64_t> where(size_t(size_), -1);
  where[size_t(rank_)] = int64_t(call.seq);
  {
    auto lock = serial();
    // Deliberately leaked: the sends to dead ranks are freed, never completed,
    // and MPI may read the buffer until process exit.
    const int64_t* query_buffer = new int64_t(int64_t(call.seq));
    const int64_t query = *query_buffer;
    std::vector<MPI_Request> sends;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request q = MPI_REQUEST_NULL;
      if (MPI_Isend(query_buffer, 1, MPI_INT64_T, r, kTagQuery, probe_, &q) == MPI_SUCCESS)
        sends.push_back(q);
    }
    const double window = std::min(2.0, std::max(0.5, 0.25 * timeout_));
    const auto until =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(window));
    int answered = 1;
    while (answered < size_ && Clock::now() < until) {
      answer_queries();
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kTagReply, probe_, &flag, &status) != MPI_SUCCESS || !flag) {
        pause_between_polls(Clock::now() - started);
        continue;
      }
      int64_t reply[2] = {0, 0};
      MPI_Recv(reply, 2, MPI_INT64_T, status.MPI_SOURCE, kTagReply, probe_, MPI_STATUS_IGNORE);
      if (reply[0] != query) continue;  // stale answer to an older question
      if (where[size_t(status.MPI_SOURCE)] < 0) ++answered;
      where[size_t(status.MPI_SOURCE)] = reply[1];
    }
    for (MPI_Request& q : sends) MPI_Request_free(&q);  // a dead peer never takes it
  }
  std::string missing, behind, arrived;
  auto add = [](std::string& list, const std::string& item) { list += (list.empty() ? "" : ", ") + item; };
  for (int r = 0; r < size_; ++r) {
    const int64_t w = where[size_t(r)];
    if (w < 0)
      add(missing, rank_name(r));
    else if (w != int64_t(call.seq))
      add(behind, rank_name(r) + " (in #" + std::to_string(w) + ")");
    else
      add(arrived, rank_name(r));
  }
  char secs[64];
  std::snprintf(secs, sizeof secs, "%.1f s (timeout_seconds %g)", waited, timeout_);
  std::string msg = "mpi: " + describe(call) + " timed out after " + secs;
  if (!missing.empty())
    msg += "; ranks that did not arrive and do not answer (dead, hung or busy): " + missing;
  if (!behind.empty()) msg += "; ranks waiting in a different collective: " + behind;
  msg += "; arrived: " + arrived + ". The communicator is now unusable: stop the job (mpirun ends it).";
  broken_reason_ = describe(call) + " timed out";
  throw Error(TDM_TIMEOUT, msg);
}

void MpiComm::scale_average(void* data, size_t count, tdm_dtype dtype) const {
  switch (dtype) {
    case TDM_F32:
      return divide<float>(data, count, size_);
    case TDM_F64:
      return divide<double>(data, count, size_);
    case TDM_F16:
      return divide16<f16_to_f32, f32_to_f16>(data, count, float(size_));
    case TDM_BF16:
      return divide16<bf16_to_f32, f32_to_bf16>(data, count, float(size_));
    case TDM_S8:
      return divide<int8_t>(data, count, size_);
    case TDM_U8:
      return divide<uint8_t>(data, count, size_);
    case TDM_S32:
      return divide<int32_t>(data, count, size_);
    case TDM_S64:
      return divide<int64_t>(data, count, size_);
    default:
      return;
  }
}

void MpiComm::allreduce(const void* send, void* recv, size_t count, tdm_dtype dtype, tdm_reduce_op op,
                        void*) {
  const MPI_Datatype type = mpi_type(dtype);
  const MPI_Op mop = mpi_op(op, dtype);
  const size_t elem = dtype_size(dtype);
  for (size_t at = 0; at < count; at += kChunk) {
    const size_t n = std::min(kChunk, count - at);
    const Call call = begin("allreduce", n, dtype, reduce_op_name(op));
    const void* s = send == recv ? MPI_IN_PLACE : static_cast<const char*>(send) + at * elem;
    void* r = static_cast<char*>(recv) + at * elem;
    run(
        call, [&] { return MPI_Allreduce(s, r, int(n), type, mop, comm_); },
        [&](MPI_Request* q) { return MPI_Iallreduce(s, r, int(n), type, mop, comm_, q); });
    if (op == TDM_REDUCE_AVG) scale_average(r, n, dtype);
  }
}

void MpiComm::allgather(const void* send, void* recv, size_t send_count, tdm_dtype dtype, void*) {
  const MPI_Datatype type = mpi_type(dtype);
  const int n = as_int(send_count, "allgather");
  if (n == 0) return;
  const Call call = begin("allgather", send_count, dtype, nullptr);
  // In place when the caller's block already sits at its slot (NCCL's rule).
  const bool in_place = send == static_cast<char*>(recv) + size_t(rank_) * send_count * dtype_size(dtype);
  const void* s = in_place ? MPI_IN_PLACE : send;
  run(
      call, [&] { return MPI_Allgather(s, n, type, recv, n, type, comm_); },
      [&](MPI_Request* q) { return MPI_Iallgather(s, n, type, recv, n, type, comm_, q); });
}

void MpiComm::reduce_scatter(const void* send, void* recv, size_t recv_count, tdm_dtype dtype,
                             tdm_reduce_op op, void*) {
  const MPI_Datatype type = mpi_type(dtype);
  const MPI_Op mop = mpi_op(op, dtype);
  const int n = as_int(recv_count, "reduce_scatter");
  if (n == 0) return;
  const Call call = begin("reduce_scatter", recv_count, dtype, reduce_op_name(op));
  run(
      call, [&] { return MPI_Reduce_scatter_block(send, recv, n, type, mop, comm_); },
      [&](MPI_Request* q) { return MPI_Ireduce_scatter_block(send, recv, n, type, mop, comm_, q); });
  if (op == TDM_REDUCE_AVG) scale_average(recv, recv_count, dtype);
}

void MpiComm::broadcast(void* buffer, size_t count, tdm_dtype dtype, int32_t root, void*) {
  const MPI_Datatype type = mpi_type(dtype);
  if (root < 0 || root >= size_)
    throw Error(TDM_INVALID_ARGUMENT,
                "mpi: broadcast root " + std::to_string(root) + " is not a rank of " + std::to_string(size_));
  const size_t elem = dtype_size(dtype);
  for (size_t at = 0; at < count; at += kChunk) {
    const size_t n = std::min(kChunk, count - at);
    const Call call = begin("broadcast", n, dtype, nullptr);
    void* b = static_cast<char*>(buffer) + at * elem;
    run(
        call, [&] { return MPI_Bcast(b, int(n), type, root, comm_); },
        [&](MPI_Request* q) { return MPI_Ibcast(b, int(n), type, root, comm_, q); });
  }
}

void MpiComm::barrier() {
  const Call call = begin("barrier", 0, TDM_U8, nullptr);
  run(
      call, [&] { return MPI_Barrier(comm_); }, [&](MPI_Request* q) { return MPI_Ibarrier(comm_, q); });
}

}  // namespace tandem::mpi
