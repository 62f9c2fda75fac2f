// A composed executor whose forward and backward run as a pipeline of
// micro-batches: every stage (device) works on its own micro-batch at the
// same time, each driven by its own host thread, in the one-forward-one-
// backward order of pipeline_schedule.hpp (interleaved where every device
// holds several chunks of the model), with the copies between stages of
// pipeline_layout.hpp, made by pipeline_copies.hpp on every kind of device.
// A stage's thread runs a segment and waits for its device to finish it: on
// a GPU, its launches go to the instance's stream and the thread waits on
// that stream, while the other stages' threads keep their devices busy.
//
// Everything but run_micro_batches goes to the composed executor it wraps
// (the "first instance"): the host's writes and reads of parameters and
// state, the optimizer's range, staging, the reports. A stage holds one
// more instance of its part per further micro-batch in flight: the part's
// executor again, bound to the first instance's persistent values except
// those of one micro-batch (pipeline_layout.hpp).
//
// Why gradients equal those of running the micro-batches one after another
// bit for bit: every stage runs its backwards (of each chunk) in
// micro-batch order on the same shared accumulators, with the same kernels
// on the same devices; each instance's activations are its own. Persistent state a forward updates
// (running statistics, the device's loss sums) is also updated in
// micro-batch order, per stage.
//
// Thread use: one thread calls it, as any executor; the stage threads are
// internal and run only within run_micro_batches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "exec/composed_executor.hpp"
#include "exec/copy_worker.hpp"
#include "exec/device_executor.hpp"
#include "exec/micro_batch_pipeline.hpp"
#include "exec/pipeline_copies.hpp"
#include "exec/pipeline_layout.hpp"

namespace tandem::host::exec {

// How busy each stage was over the steps run so far.
struct PipelineStats {
  uint64_t steps = 0;
  double wall_us = 0;           // run_micro_batches, summed
  std::vector<double> busy_us;  // per stage: its segments, summed
  // The share of stage-time spent idle: 1 - busy / (stages * wall).
  double idle_fraction() const;
};

class PipelinedExecutor final : public Executor, public MicroBatchPipeline {
 public:
  // `instances[p]`: part p's further instances (as many as its stage holds
  // micro-batches at once, less one), bound to part p's persistent values.
  PipelinedExecutor(std::unique_ptr<ComposedExecutor> composed, PipelineLayout layout,
                    std::vector<std::vector<std::unique_ptr<DeviceExecutor>>> instances);
  ~PipelinedExecutor() override;

  // Forward and backward of layout().micro_batches micro-batches:
  // `inputs[m][k]` are micro-batch m's bytes of PipelineRequest's value k;
  // `outputs` (global values, e.g. the loss) are read after each
  // micro-batch into `results[m][k]`. Returns when every stage is done;
  // the first failure of any stage (the others stop at their next wait).
  Result<void> run_micro_batches(const std::vector<std::vector<ConstBytes>>& inputs,
                                 const std::vector<ValueId>& outputs,
                                 const std::vector<std::vector<MutableBytes>>& results) override;
  size_t micro_batch_count() const noexcept override { return layout_.micro_batches; }

  const PipelineLayout& layout() const noexcept { return layout_; }
  const PipelineStats& stats() const noexcept { return stats_; }
  // Every segment run since creation or clear_profile (the first million).
  const std::vector<PipelineSpan>& spans() const noexcept { return spans_; }
  // Device ids, by stage.
  std::vector<std::string> stage_devices() const;
  // Bytes the further instances allocated, per part.
  uint64_t instance_bytes(size_t part) const;
  // How the copies between stages run (the composed executor's, which
  // decide each transfer's route; TransferOptions::as_device drives a CPU
  // device as a GPU is driven, to test those routes without one).
  Result<void> set_transfer_options(TransferOptions options);
  // Copies between stages made by `route` since the options were last set.
  uint64_t copies(CopyRoute route) const;

  // The Executor interface: the composed executor's.
  Result<void> write(ValueId value, const void* host, size_t bytes) override;
  Result<void> read(ValueId value, void* host, size_t bytes) override;
  Result<void> fill(ValueId value, double number) override;
  void* device_pointer(ValueId value) const override;
  using Executor::run;
  Result<void> run(size_t first, size_t end) override;
  Result<void> synchronize() override;
  Result<void> allow_staging(ValueId value) override;
  Result<void*> reserve_buffer(size_t bytes, const std::string& what) override;
  Result<void> stage(ValueId value, const void* host, size_t bytes) override;
  Result<void> use_staged() override;
  const Plan& plan() const noexcept override;
  size_t node_count() const noexcept override;
  uint64_t allocated_bytes() const noexcept override;
  uint64_t measured_peak() const override;
  uint64_t host_reads() const noexcept override;
  uint64_t host_read_bytes() const noexcept override;
  void clear_profile() override;
  NodeKernel node_kernel(size_t position) const override;
  const std::vector<ExecutorPart>& parts() const noexcept override;
  const std::vector<ExecutorTransfer>& transfers() const noexcept override;
  uint64_t transfers_run() const noexcept override;
  uint64_t transferred_bytes() const noexcept override;
  double transfer_busy_us() const noexcept override;
  double transfer_wait_us() const noexcept override;

 protected:
  const NodeProfile& profile() const noexcept override;

 private:
  struct Step;  // one run_micro_batches: what the stages wait for (pipelined_executor.cpp)

  DeviceExecutor& instance(size_t stage, size_t micro) const;
  Result<void> run_stage(Step& step, size_t stage);
  Result<void> run_segment(Step& step, size_t stage, size_t micro, size_t segment);
  Result<void> begin_micro_batch(Step& step, size_t stage, size_t micro);
  Result<void> end_micro_batch(Step& step, size_t stage, size_t micro);
  // Pull `pull` of `micro`, claimed by the caller: its bytes into the
  // reading stage's instance.
  Result<void> copy(Step& step, size_t pull, size_t micro);
  // A copy between the first instances, once per step.
  Result<void> copy_between_first_instances(size_t transfer);
  // The copier for the transfer options in force, made at the first step
  // after they were set.
  Result<void> start_copies();

  std::unique_ptr<ComposedExecutor> composed_;
  PipelineLayout layout_;
  std::vector<std::vector<std::unique_ptr<DeviceExecutor>>> instances_;  // by part
  std::vector<std::unique_ptr<CopyWorker>> workers_;                     // by stage
  std::unique_ptr<PipelineCopies> copier_;
  PipelineStats stats_;
  std::vector<PipelineSpan> spans_;
  uint64_t copies_ = 0, copied_bytes_ = 0;
};

}  // namespace tandem::host::exec
