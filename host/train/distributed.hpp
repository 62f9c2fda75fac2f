// Data parallelism across processes started by a launcher (mpirun, srun, or
// anything that sets RANK/WORLD_SIZE/LOCAL_RANK): each rank trains on its
// shard of every global batch, and gradients are averaged with the comm
// plugin that fits the device (`mpi` for CPU memory, `nccl` for GPU memory)
// before the optimizer step, so every rank applies the same update.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "device/device.hpp"
#include "exec/collectives.hpp"
#include "exec/stage_link.hpp"
#include "plugin/registry.hpp"
#include "program/process_group.hpp"
#include "train/collective_watchdog.hpp"
#include "train/streamed_allreduce.hpp"
#include "train/threaded_point_to_point.hpp"

namespace tandem::host::train {

using program::ProcessGroup;

// What comm_create needs to know about this process (no rendezvous id):
// `device` is the index of the rank's device (-1: host memory).
tdm_comm_init_info comm_init_info(const ProcessGroup& group, double timeout_seconds, int32_t device = -1);

// "rank 1: allreduce of 4096 f32 in comm plugin 'tcp' (/path)".
std::string describe_call(int rank, const char* what, size_t count, tdm_dtype dtype,
                          const LoadedPlugin& plugin);
// Whether `plugin` has ABI 1.16's send_start, recv_start and request_test
// (all three).
bool starts_transfers(const LoadedPlugin& plugin);
// Whether `plugin` has ABI 1.15's blocking send and recv.
bool has_send_and_recv(const LoadedPlugin& plugin);

// How a run's ranks are joined: which comm plugin, how its rendezvous id
// reaches every rank, how long a collective may wait.
struct CommOptions {
  // The comm plugin by name ([train] comm, --comm); "" chooses by the
  // device's memory: nccl for GPU memory, mpi for host memory.
  std::string plugin;
  // A collective waiting longer fails, naming the ranks that did not
  // arrive, instead of hanging the job (0: no limit).
  double timeout_seconds = 300;
  // How rank 0's comm_unique_id reaches the others: "mpi" or
  // "file:///path" (rendezvous.hpp).
  std::string rendezvous = "mpi";
  // The host will send point to point on the communicator (a pipeline's
  // stages): told to the plugin at comm_create (ABI 1.17), which may make
  // per-peer resources then. Set by the host, not the user.
  bool point_to_point = false;
};

// The run's communicator: averages gradients for data parallelism and runs
// the "comm.*" nodes of tensor parallelism.
class GradientCommunicator final : public exec::Collectives, public exec::StageLink, public StreamAverager {
 public:
  // Creates a communicator over the comm plugin `options` choose, on
  // `device`'s memory. A plugin with comm_unique_id (nccl, or a third
  // party's) gets rank 0's id through the rendezvous; one without
  // bootstraps itself from its launcher (mpi).
  // With `part`, the communicator joins only the ranks that pass the same
  // number, `group` numbering them within it (the groups of tensor
  // parallelism, and the ranks across them that average gradients; the
  // stages of a pipeline): through a self-bootstrapping plugin of ABI 1.10
  // or newer, which splits its world by `part`, or one with comm_unique_id,
  // whose ranks get their group's rank 0's id through the rendezvous.
  // `point_to_point`: the plugin must have send and recv (ABI 1.15), else it
  // is refused by name.
  // Every call into the plugin is watched: one that outlives its timeout
  // stops the process with the plugin and the collective named
  // (collective_watchdog.hpp).
  static Result<std::unique_ptr<GradientCommunicator>> create(
      const PluginRegistry& registry, const DeviceHandle& device, const ProcessGroup& group,
      const CommOptions& options, std::optional<int32_t> part = std::nullopt, bool point_to_point = false);
  // A communicator of host memory whatever the rank's device, with point to
  // point: pipeline parallelism's stage link (its messages are host
  // memory, exec/rank_pipeline.hpp). Through the comm plugin `options`
  // name, else mpi.
  static Result<std::unique_ptr<GradientCommunicator>> create_on_host(const PluginRegistry& registry,
                                                                      const ProcessGroup& group,
                                                                      const CommOptions& options,
                                                                      std::optional<int32_t> part);
  ~GradientCommunicator();
  GradientCommunicator(const GradientCommunicator&) = delete;
  GradientCommunicator& operator=(const GradientCommunicator&) = delete;

  // In place: every rank ends with the mean over ranks, when it returns.
  Result<void> average(void* buffer, size_t count, tdm_dtype dtype) {
    return average(buffer, count, dtype, nullptr);
  }
  // The same enqueued on `stream`, the backend's native handle of a stream
  // of the communicator's device: returns at once (streamed_allreduce.hpp).
  Result<void> average(void* buffer, size_t count, tdm_dtype dtype, void* stream) override;
  // Every rank ends with the maximum (used to agree on stopping).
  Result<int32_t> max(int32_t value);

  // The comm plugin it runs through (recorded in checkpoints).
  const LoadedPlugin& plugin() const noexcept { return plugin_; }
  // Whether its plugin sends and receives point to point (ABI 1.15 or 1.16).
  bool has_point_to_point() const;
  int rank() const override { return group_.rank; }
  int world() const override { return group_.world; }
  Result<void> all_reduce_sum(void* buffer, size_t count, tdm_dtype dtype, void* stream) override;
  Result<void> all_gather(const void* send, void* receive, size_t send_count, tdm_dtype dtype,
                          void* stream) override;
  Result<void> reduce_scatter_mean(const void* send, void* receive, size_t receive_count, tdm_dtype dtype,
                                   void* stream) override;
  // all_gather of host memory, whatever the communicator's device (a GPU's
  // through a device buffer of at most kStagingBytes per rank,
  // staged_gather.hpp): checkpoints gather slices and shards so.
  Result<void> all_gather_host(const void* send, void* receive, size_t send_count, tdm_dtype dtype);
  // Pipeline parallelism (a communicator of the ranks that differ only in
  // their stage): point to point through the plugin's send_start,
  // recv_start and request_test (ABI 1.16), or, for a plugin of 1.15 with
  // only the blocking send and recv, those on threads of their own
  // (threaded_point_to_point.hpp); create() checks for one or the other
  // when `point_to_point` is asked.
  int stage() const override { return group_.rank; }
  Result<std::unique_ptr<exec::StageLink::Transfer>> start_send(const void* data, size_t bytes,
                                                                int to) override;
  Result<std::unique_ptr<exec::StageLink::Transfer>> start_receive(void* data, size_t bytes,
                                                                   int from) override;
  double timeout_seconds() const override { return timeout_seconds_; }
  Result<void> broadcast(void* data, size_t bytes, int root) override;
  // A communicator of a device's memory whose plugin starts transfers
  // (distributed_stage_link.cpp): the stages' messages stay on the device.
  bool moves_device_memory() const override;
  Result<std::unique_ptr<exec::StageLink::Transfer>> start_device_send(const void* data, size_t bytes,
                                                                       int to) override;
  Result<std::unique_ptr<exec::StageLink::Transfer>> start_device_receive(void* data, size_t bytes,
                                                                          int from) override;

 private:
  GradientCommunicator(const LoadedPlugin& plugin, tdm_comm* comm, const ProcessGroup& group,
                       double timeout_seconds)
      : plugin_(plugin), comm_(comm), group_(group), timeout_seconds_(timeout_seconds) {}
  // The plugin's communicator over `group` (`part` as for create), its
  // buffers on device `device_index` (-1: host memory).
  static Result<std::unique_ptr<GradientCommunicator>> join(
      const LoadedPlugin& plugin, const PluginRegistry& registry, const ProcessGroup& group,
      const CommOptions& options, std::optional<int32_t> part, bool point_to_point, int32_t device_index);
  // Rank 0's comm_unique_id, delivered to every rank (of the group
  // `part`, with one), then comm_create.
  static Result<tdm_comm*> create_with_id(const LoadedPlugin& plugin, const PluginRegistry& registry,
                                          const ProcessGroup& group, int32_t device,
                                          const CommOptions& options, std::optional<int32_t> part);
  // GPU collectives read device memory: a stream and a scratch for host bytes.
  Result<void> stage_on_device(const DeviceHandle& device);
  // `call` on the host's `bytes` (on a device communicator, on a device copy
  // of them, copied back after); `what` names the step in errors.
  Result<void> on_host_bytes(void* data, size_t bytes, const std::string& what,
                             const std::function<tdm_status(void*)>& call);
  static constexpr size_t kScratchBytes = 64;
  static constexpr size_t kStagingBytes = size_t(16) << 20;
  Error failure(const char* what, tdm_status status) const;
  // `call` into the plugin, watched past the run's timeout
  // (collective_watchdog.hpp).
  template <class Call>
  tdm_status watched(const char* what, size_t count, tdm_dtype dtype, Call&& call) const {
    const WatchedCall watch([=, this] { return describe(what, count, dtype); }, timeout_seconds_);
    return call();
  }
  class PluginTransfer;
  class StagedTransfer;
  // The plugin's send_start or recv_start on `data` (memory of the
  // communicator's kind).
  Result<std::unique_ptr<exec::StageLink::Transfer>> start(bool sending, void* data, size_t bytes, int peer);
  // Host bytes sent or received through a device buffer (StagedTransfer).
  Result<std::unique_ptr<exec::StageLink::Transfer>> staged(bool sending, void* host, size_t bytes, int peer);
  // A copy between host and the device's memory on the communicator's
  // stream, complete when it returns; `what` begins its error.
  Result<void> device_copy(bool to_device, void* into, const void* from, size_t bytes, const char* what);
  // The blocking send and recv on threads, made on first use.
  ThreadedPointToPoint& threaded();
  // "rank 1: allreduce of 4096 f32 in comm plugin 'tcp' (/path)".
  std::string describe(const char* what, size_t count, tdm_dtype dtype) const;

  const LoadedPlugin& plugin_;
  tdm_comm* comm_;
  ProcessGroup group_;
  double timeout_seconds_;
  const DeviceHandle* device_ = nullptr;  // with a device scratch (GPU)
  tdm_stream* stream_ = nullptr;
  void* scratch_ = nullptr;
  std::unique_ptr<ThreadedPointToPoint> threaded_;
};

}  // namespace tandem::host::train
