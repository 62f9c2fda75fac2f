// `tandem train`: the training loop around one device.
//
// Per step: the loader's next batch is copied in, the learning rate (a
// function of the step) and AdamW's step count are written, forward and
// backward run, gradients are clipped when asked (the host reads the global
// norm, writes the coefficient), the optimizer ops run, and loss and
// accuracy are read back. At each epoch end the validation and test sets are
// evaluated and a checkpoint is saved. Everything random is a function of
// (seed, step/epoch, sample), so a resumed run is bit-identical to an
// uninterrupted one.
#pragma once

#include <atomic>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "data/loader.hpp"
#include "exec/executor.hpp"
#include "lowering/model_graph.hpp"
#include "place/auto_placement.hpp"
#include "place/fit_advice.hpp"
#include "place/placement.hpp"
#include "plugin/registry.hpp"
#include "train/datasets.hpp"
#include "train/distributed.hpp"
#include "train/executor_scalars.hpp"
#include "train/features.hpp"
#include "train/overlapped_allreduce.hpp"
#include "train/profile_report.hpp"
#include "train/progress.hpp"
#include "train/tensor_shards.hpp"

namespace tandem::host::train {

struct TrainOptions {
  std::string run_dir;    // metrics.jsonl and checkpoints/ go here
  std::string resume;     // a run directory or a checkpoint file to continue from
  std::string init_from;  // a checkpoint to take weights from (not optimizer state)
  std::string profile;    // Chrome/Perfetto trace file to write
  bool memory_report = false;
  // Within an epoch, the next micro-batch's input and labels are copied to
  // the device (Executor::stage) while the current one runs; off: each is
  // written when its step starts. Either way the numbers are the same.
  bool prefetch = true;
  bool live_progress = false;  // a terminal: rewrite one progress line
  int loader_threads = 2;
  const std::atomic<bool>* stop = nullptr;      // set by SIGINT/SIGTERM/SIGHUP: save and stop after this step
  std::atomic<bool>* status_request = nullptr;  // set by SIGUSR1: print the progress line now (then cleared)
  // Data parallelism: a collective waiting longer than this fails and names
  // the ranks that did not arrive, instead of hanging the job.
  double comm_timeout_seconds = 300;
  // `tandem plan`: build, place and stop before allocating anything; only
  // write_plan may be called then.
  bool plan_only = false;
  // Bytes each device may hold, by device id ("onednn:0"); absent: no limit.
  std::map<std::string, uint64_t> memory_budgets;
  // Other devices the run may use besides the one it was created with
  // (`--device onednn:0,reference:0`): with them, layers are placed
  // automatically unless [train] placement says otherwise.
  std::vector<std::string> devices;
  // The cost model of automatic placement: its cache directory (empty: the
  // default, cost_model.hpp) and what else changes timings ("threads=2").
  std::string cost_cache_dir;
  std::string cost_context;
  bool recalibrate = false;  // measure the op costs again instead of reading the cache
  // Data parallelism: gradients are averaged in buckets of about this many
  // bytes, each while backward continues (0: one gradient per message).
  size_t bucket_bytes = size_t(4) << 20;
  // GPU data parallelism: how NCCL's id reaches every rank ("mpi" or
  // "file:///shared/path").
  std::string rendezvous = "mpi";
};

struct TrainResult {
  int64_t steps = 0;
  bool interrupted = false;
  std::string last_checkpoint;
  double seconds = 0;
  double samples_per_second = 0;
  double last_loss = 0;
  std::optional<double> validation_accuracy;
  std::optional<double> test_accuracy;
};

class Trainer {
 public:
  static Result<std::unique_ptr<Trainer>> create(const model::ModelSpec& spec, const DeviceHandle& device,
                                                 const PluginRegistry& registry, TrainOptions options);
  ~Trainer();
  Result<TrainResult> run();

  const lowering::ModelGraph& model() const { return model_; }
  // `tandem plan`: every layer's device, each device's planned memory
  // against its budget, the copies per step (plan_report.cpp). An error
  // when a device's plan is over its budget, after the table.
  Result<void> write_plan(std::ostream& out) const;
  // This process's place among the data-parallel ranks (rank 0 of 1 alone).
  const ProcessGroup& group() const { return group_; }
  exec::Executor& executor() { return *executor_; }
  // What each device's allocator held at most during the training steps of
  // the last run(), before evaluation (by device id; empty before a run).
  const std::map<std::string, uint64_t>& training_peaks() const { return training_peaks_; }
  // The assignment automatic placement chose (none: not automatic).
  const std::optional<place::AutoPlacement>& automatic_placement() const { return automatic_; }

 private:
  Trainer(const model::ModelSpec& spec, const DeviceHandle& device, const PluginRegistry& registry,
          TrainOptions options);
  Result<void> initialise();
  Result<void> resume_from(const std::string& path, bool weights_only);
  // Forward and backward of one micro-batch; returns its loss. `staged`:
  // the batch was staged during the previous micro-batch (use it, do not
  // write it); `next`: the batch to stage while this one runs (or null).
  Result<double> micro_step(const data::Batch& batch, bool staged, const data::Batch* next, int64_t step,
                            uint32_t micro, int64_t total_steps, int64_t& correct);
  // Nodes [0, optimizer_begin): forward and backward, with each gradient
  // bucket's all-reduce started once backward has finished it.
  Result<void> forward_backward(bool last_micro_batch);
  // Hooks, clipping, and the update (gradients are averaged by then).
  Result<void> optimizer_step(int64_t step);
  // After the graph passes: where the optimizer phase and clipping start,
  // which gradients ranks average, which nodes run on a skipped step.
  void locate_optimizer_phase();
  // Where every node runs, the copies between devices, and the devices to
  // open: pinned layers, automatic placement, optimizer offload (none of
  // them: everything on device_, no placement).
  Result<void> place();
  // Every device the run may place layers on (device_ first), opened; and
  // whether the user named several (then placement is automatic by default).
  Result<std::vector<std::string>> candidate_devices();
  Result<std::string> open_device(const std::string& name);
  // Capacity of each device for automatic placement: its budget, else the
  // memory its backend reports free.
  std::map<std::string, uint64_t> capacities() const;
  place::FitContext fit_context() const;
  // For plan estimates: the run's devices, host reads and micro-batches;
  // budgets are the capacities (automatic placement) or only the explicit ones.
  place::EstimateInputs estimate_inputs(place::CostModel* costs, place::WorkspaceCache* workspaces,
                                        bool capacity) const;
  place::CostModelOptions cost_options() const;
  // Every model layer's device (the run's device for an unplaced graph).
  std::map<std::string, std::string> layer_devices() const;
  // A device refused an allocation the plan counted on: remember what it
  // held, place again within that (moving unpinned layers) and say what
  // moved; or an error saying what to change.
  Result<void> replan_after_oom(const Error& oom);
  Result<std::unique_ptr<exec::Executor>> make_executor(const Graph& graph,
                                                        const std::optional<place::Placement>& placement,
                                                        exec::ExecutorOptions options) const;
  Result<std::string> save(int64_t step, int64_t epoch, int64_t next_batch);
  std::map<std::string, std::string> metadata(int64_t step, int64_t epoch, int64_t next_batch) const;
  // Planned memory per device, the copies between devices; `steps` trained.
  void report_memory(int64_t steps) const;
  void record_memory(Progress& progress) const;
  void note_training_peaks();

  const model::ModelSpec& spec_;
  const DeviceHandle& device_;
  std::vector<std::unique_ptr<DeviceHandle>> extra_devices_;  // pinned devices other than device_
  std::map<std::string, const DeviceHandle*> devices_;        // every device of the run, by id
  std::optional<place::Placement> placement_;                 // layers on several devices
  place::PlacementOptions placement_options_;          // how placement_ was made (evaluation reuses it)
  std::string placement_mode_ = "pinned";              // auto | pinned | strict, as decided
  std::optional<place::AutoPlacement> automatic_;      // what automatic placement chose
  std::map<std::string, std::string> resolved_pins_;   // a pin as written -> its device id
  std::map<std::string, uint64_t> measured_capacity_;  // devices that ran out of memory: what they held
  Graph unplaced_;                                     // the training graph before placement
  bool force_automatic_ = false;                       // after running out of memory
  const PluginRegistry& registry_;
  TrainOptions options_;
  RunData data_;
  lowering::ModelGraph model_;
  std::unique_ptr<exec::Executor> executor_;
  std::unique_ptr<FeatureSet> features_;
  std::unique_ptr<ExecutorScalars> scalars_;  // what feature hooks read and write
  ProcessGroup group_;
  int data_rank_ = 0, data_world_ = 1;  // among the ranks that split the data (1 with tensor parallelism)
  std::map<std::string, lowering::Shard> shards_;  // tensors split by tensor parallelism, by name
  uint32_t micro_batches_ = 1;             // per optimizer step, from a feature (gradient accumulation)
  int64_t micro_batch_samples_ = 0;        // samples of one micro-batch (the graph's batch size)
  size_t clip_point_ = 0;                  // first optimizer node that needs the clipping coefficient
  std::vector<ValueId> synced_gradients_;  // what ranks average: the gradients as the optimizer reads them
  std::vector<size_t> run_on_skip_;        // optimizer nodes that run even when a step is skipped
  std::unique_ptr<GradientCommunicator> comm_;      // only when world > 1
  std::unique_ptr<OverlappedAllReduce> allreduce_;  // with comm_
  std::unique_ptr<ProfileRecorder> profiler_;
  int64_t start_step_ = 0, start_epoch_ = 0, start_batch_ = 0;
  std::vector<float> logits_;
  std::map<std::string, uint64_t> training_peaks_;
};

}  // namespace tandem::host::train
