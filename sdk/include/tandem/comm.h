/* Tandem SDK — communication plugins: collectives between processes.
 *
 * A communicator joins `world_size` processes; each collective is called by
 * every rank in the same order. Buffers are device memory of the device the
 * communicator was created for; `stream` is that backend's native stream
 * handle (tdm_backend_api.stream_native_handle), or NULL (CPU buffers, and
 * wherever the host has no stream to order against): then the call
 * completes before returning. The host averages GPU gradients on a stream
 * of its own, ordered with the compute stream by events, and never waits
 * for the call itself. Collectives on one communicator are issued from one
 * thread at a time. Which functions the host requires and calls:
 * sdk/ABI.md rules 46-47.
 */
#ifndef TANDEM_COMM_H
#define TANDEM_COMM_H

#include "tandem/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_comm tdm_comm; /* opaque, plugin-owned */
/* Since ABI 1.16: a point-to-point transfer in flight (send_start,
 * recv_start), plugin-owned until request_test reports it finished. */
typedef struct tdm_comm_request tdm_comm_request;

typedef int32_t tdm_reduce_op;
enum { TDM_REDUCE_SUM = 0, TDM_REDUCE_MAX = 1, TDM_REDUCE_MIN = 2, TDM_REDUCE_AVG = 3 };

typedef struct tdm_comm_init_info {
  uint32_t struct_size;
  int32_t rank;
  int32_t world_size;
  int32_t local_rank;
  /* Rendezvous data produced by rank 0's comm_unique_id and delivered to
   * every rank by the host (through MPI or a rendezvous file), or NULL when
   * the plugin bootstraps itself (MPI). Valid during the call. */
  const void* unique_id;
  size_t unique_id_bytes;
  /* Seconds a collective may block before it fails with TDM_TIMEOUT and
   * names the ranks that did not arrive. 0 = no limit. */
  double timeout_seconds;
  /* Since ABI 1.5: the rank's device — the index of `<backend>:<index>`
   * whose memory the collectives' buffers are in (the GPU the host chose
   * for this rank) — or -1 when the buffers are host memory. A GPU comm
   * plugin creates its communicator on this device; an older host leaves
   * the field out (struct_size), and the plugin then chooses itself. */
  int32_t device;
  /* Since ABI 1.10: the processes whose comm_create passes the same `group`
   * form one communicator, of `world_size` ranks numbered by `rank` within
   * it (0 for all: one communicator over every process). A run of data and
   * tensor parallelism together has one for each tensor-parallel group and
   * one for each set of ranks that hold the same slices. Every process calls
   * comm_create for the same communicators in the same order. An older host
   * leaves the field out (struct_size): one group. A plugin that bootstraps
   * itself (unique_id NULL) splits its world by it. The host asks for
   * groups of such a plugin (mpi), and of one that needs a rendezvous id
   * (comm_unique_id), which gets one per group from the group's rank 0
   * (sdk/ABI.md rule 46). */
  int32_t group;
  /* Since ABI 1.17: 1 on a communicator the host will send point to point
   * on (a pipeline's stages), else 0; an older host leaves it out. A
   * plugin whose library runs a communicator's operations one after
   * another makes here, while every rank is in comm_create, what lets a
   * receive started early not hold back a send (NCCL: a communicator per
   * ordered pair of ranks); others ignore it (sdk/ABI.md rule 47). */
  int32_t point_to_point;
} tdm_comm_init_info;

typedef struct tdm_comm_api {
  uint32_t struct_size;
  /* Optional: rendezvous bytes rank 0 creates for the others (NCCL's unique
   * id). On entry *bytes is the buffer's capacity, on return the size used. */
  tdm_status (*comm_unique_id)(void* buffer, size_t* bytes);
  tdm_status (*comm_create)(const tdm_comm_init_info* info, tdm_comm** out);
  void (*comm_destroy)(tdm_comm* comm);

  tdm_status (*allreduce)(tdm_comm* comm, const void* send, void* recv, size_t count, tdm_dtype dtype,
                          tdm_reduce_op op, void* stream);
  /* recv holds world_size * send_count elements, rank-major. */
  tdm_status (*allgather)(tdm_comm* comm, const void* send, void* recv, size_t send_count, tdm_dtype dtype,
                          void* stream);
  /* send holds world_size * recv_count elements; rank r receives block r. */
  tdm_status (*reduce_scatter)(tdm_comm* comm, const void* send, void* recv, size_t recv_count,
                               tdm_dtype dtype, tdm_reduce_op op, void* stream);
  tdm_status (*broadcast)(tdm_comm* comm, void* buffer, size_t count, tdm_dtype dtype, int32_t root,
                          void* stream);
  tdm_status (*barrier)(tdm_comm* comm);
  /* Since ABI 1.15, optional: point to point, for pipeline parallelism
   * (sdk/ABI.md rule 47). `send` hands `count` elements to rank `peer` of
   * the communicator, `recv` takes them from rank `peer`. The messages from
   * one rank to another are received in the order they were sent (no tags).
   * `stream` as for the collectives: NULL, and the call has completed when
   * it returns (send: the buffer may be reused). The host calls send and
   * recv from several threads of a rank at once (one per peer and
   * direction), beside the collectives of other communicators; the calls
   * honour `timeout_seconds` as the collectives do. */
  tdm_status (*send)(tdm_comm* comm, const void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                     void* stream);
  tdm_status (*recv)(tdm_comm* comm, void* buffer, size_t count, tdm_dtype dtype, int32_t peer, void* stream);
  /* Since ABI 1.16, optional (all three or none): the same transfers
   * started and left to run, so that the thread that computes posts and
   * completes them itself (sdk/ABI.md rule 47). `send_start` and
   * `recv_start` return at once with *out set; the buffer stays the
   * caller's to keep valid, and untouched, until `request_test` has set
   * *done to 1, which also releases the request. A request that fails is
   * released too (the call returns the error). A rank's messages to a peer
   * keep the order in which they were sent or started, and its receives
   * from a peer take them in the order those were made or started.
   * request_test never blocks, and calling it is what lets the
   * plugin's library progress the transfers (MPI without a progress
   * thread). The host calls the three from one thread per communicator;
   * requests still in flight at comm_destroy are the plugin's to release. */
  tdm_status (*send_start)(tdm_comm* comm, const void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                           void* stream, tdm_comm_request** out);
  tdm_status (*recv_start)(tdm_comm* comm, void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                           void* stream, tdm_comm_request** out);
  tdm_status (*request_test)(tdm_comm* comm, tdm_comm_request* request, int32_t* done);
} tdm_comm_api;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TANDEM_COMM_H */
