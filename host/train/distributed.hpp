// Data parallelism across processes started by a launcher (mpirun, srun, or
// anything that sets RANK/WORLD_SIZE/LOCAL_RANK): each rank trains on its
// shard of every global batch, and gradients are averaged with the comm
// plugin that fits the device (`mpi` for CPU memory, `nccl` for GPU memory)
// before the optimizer step, so every rank applies the same update.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "device/device.hpp"
#include "exec/collectives.hpp"
#include "plugin/registry.hpp"
#include "program/process_group.hpp"
#include "train/streamed_allreduce.hpp"

namespace tandem::host::train {

using program::ProcessGroup;

// What comm_create needs to know about this process (no rendezvous id):
// `device` is the index of the rank's device (-1: host memory).
tdm_comm_init_info comm_init_info(const ProcessGroup& group, double timeout_seconds, int32_t device = -1);

// The run's communicator: averages gradients for data parallelism and runs
// the "comm.*" nodes of tensor parallelism.
class GradientCommunicator final : public exec::Collectives, public StreamAverager {
 public:
  // Creates a communicator over the comm plugin for `device`'s memory.
  // `timeout_seconds`: a collective waiting longer fails, naming the ranks
  // that did not arrive, instead of hanging the job.
  // GPU memory goes through the nccl plugin, whose id reaches every rank by
  // `rendezvous` ("mpi" or "file:///path", see rendezvous.hpp); host memory
  // through the mpi plugin.
  // With `part`, the communicator joins only the ranks that pass the same
  // number, `group` numbering them within it (the groups of tensor
  // parallelism, and the ranks across them that average gradients): host
  // memory only, through an mpi plugin of ABI 1.10 or newer.
  static Result<std::unique_ptr<GradientCommunicator>> create(const PluginRegistry& registry,
                                                              const DeviceHandle& device,
                                                              const ProcessGroup& group,
                                                              double timeout_seconds,
                                                              const std::string& rendezvous = "mpi",
                                                              std::optional<int32_t> part = std::nullopt);
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

  int rank() const override { return group_.rank; }
  int world() const override { return group_.world; }
  Result<void> all_reduce_sum(void* buffer, size_t count, tdm_dtype dtype, void* stream) override;
  Result<void> all_gather(const void* send, void* receive, size_t send_count, tdm_dtype dtype,
                          void* stream) override;
  Result<void> reduce_scatter_mean(const void* send, void* receive, size_t receive_count, tdm_dtype dtype,
                                   void* stream) override;

 private:
  GradientCommunicator(const LoadedPlugin& plugin, tdm_comm* comm, const ProcessGroup& group)
      : plugin_(plugin), comm_(comm), group_(group) {}
  static Result<tdm_comm*> create_on_gpu(const LoadedPlugin& nccl, const PluginRegistry& registry,
                                         const ProcessGroup& group, const DeviceHandle& device,
                                         double timeout_seconds, const std::string& rendezvous);
  // GPU collectives read device memory: max() stages its value through this.
  Result<void> stage_on_device(const DeviceHandle& device);
  Error failure(const char* what, tdm_status status) const;

  const LoadedPlugin& plugin_;
  tdm_comm* comm_;
  ProcessGroup group_;
  const DeviceHandle* device_ = nullptr;  // with a device scratch (GPU)
  tdm_stream* stream_ = nullptr;
  void* scratch_ = nullptr;
};

}  // namespace tandem::host::train
