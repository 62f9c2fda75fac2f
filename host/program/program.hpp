// The program of a run: a model file lowered to its step graph, the feature
// plugins' passes applied, the graph placed on the run's devices and
// planned, and the executors that run it.
//
//   model.toml -> lowering (forward, autodiff, optimizer) with the passes of
//   [features.*] at their stages -> placement (pins, automatic, optimizer
//   offload) -> streaming (which layers' state lives in host memory) ->
//   memory plan -> executors
//
// `tandem train`, `plan`, `bench` and `eval` all build theirs here, the same
// way, so what `plan` prints and `bench` measures is what `train` runs. The
// Trainer (train/trainer.hpp) only adds the loop: data, steps, evaluation,
// checkpoints, ranks.
//
// Eval mode builds the forward graph of one batch size in evaluation form
// (no passes, no autodiff), placed as the model file pins it, or as a
// training run placed its parameters (ProgramOptions::placement).
#pragma once

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "exec/executor.hpp"
#include "exec/micro_batch_pipeline.hpp"
#include "exec/pipelined_executor.hpp"
#include "exec/rank_pipeline.hpp"
#include "lowering/int8_plan.hpp"
#include "lowering/model_graph.hpp"
#include "place/auto_placement.hpp"
#include "place/fit_advice.hpp"
#include "place/placement.hpp"
#include "place/split.hpp"
#include "plugin/registry.hpp"
#include "program/features.hpp"
#include "program/parallel_layout.hpp"
#include "program/process_group.hpp"
#include "program/run_devices.hpp"

namespace tandem::host::program {

// Auto: none while the run fits its device; when it does not, the fewest
// layers (largest first) that make it fit, and with several devices when
// that is faster than moving layers to another. Every: all (--stream-params).
// None: none (--no-stream).
enum class StreamChoice { Auto, Every, None };

struct ProgramOptions {
  lowering::Mode mode = lowering::Mode::Train;
  // Eval: samples per run of the graph (0: [train] batch_size). Train: the
  // batch is [train] batch_size, or a feature's micro-batch.
  int64_t batch = 0;
  const lowering::Int8Plan* int8 = nullptr;  // eval of a quantized model
  ProcessGroup group;                        // the run's ranks (one process: rank 0 of 1)
  // Other devices the run may use besides the one it is built for
  // (`--device onednn:0,reference:0`): with them, layers are placed
  // automatically unless [train] placement says otherwise.
  std::vector<std::string> devices;
  // Bytes each device may hold, by device id ("onednn:0"); absent: no limit.
  std::map<std::string, uint64_t> memory_budgets;
  // The cost model of automatic placement: its cache directory (empty: the
  // default, cost_model.hpp), what else changes timings ("threads=2"), and
  // whether to measure again instead of reading the cache.
  std::string cost_cache_dir;
  std::string cost_context;
  bool recalibrate = false;
  // The next batch's inputs get a second device buffer (Executor::stage),
  // counted in the plan.
  bool prefetch = true;
  // Eval within a training run: place as training did (its pins and the
  // homes of its parameters), instead of deciding anew.
  std::optional<place::PlacementOptions> placement;
  // Devices already open (by id) that the run shares (an evaluation of a
  // training run): opened again otherwise.
  std::map<std::string, const DeviceHandle*> open_devices;
  // Training: which layers' parameters, gradients and optimizer state live
  // in host memory and are streamed through the device (exec/stream_plan.hpp),
  // fetched `stream_depth` layers ahead. A layer's `stream` in the model
  // file overrides the choice for that layer.
  StreamChoice streaming = StreamChoice::Auto;
  size_t stream_depth = 1;
  // Pipeline parallelism across ranks: makes every rank's cut of the layers
  // into stages (one stage index per layer) the first rank's. Absent: the
  // cut measured here stands (one process: `tandem plan`).
  std::function<Result<void>(std::vector<size_t>& stage_of_layer)> agree;
};

class Program {
 public:
  // Lowers, applies the passes and places; allocates nothing on a device.
  static Result<std::unique_ptr<Program>> build(const model::ModelSpec& spec, const DeviceHandle& device,
                                                const PluginRegistry& registry, ProgramOptions options);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // The executors of the placed graph. A device that then holds less than
  // the plan assumed makes the program place again within what it held
  // (moving unpinned layers, saying what moved) before giving up.
  Result<void> allocate(exec::ExecutorOptions options);

  // `tandem plan`: every layer's device, each device's planned memory
  // against its budget, the copies per step, the estimated step time. An
  // error when a device's plan is over its budget, after the table.
  Result<void> write_plan(std::ostream& out) const;
  // A training program's evaluation graph (run at each epoch's end:
  // batch_norm in inference form, no dropout), placed as this program
  // places its layers, with every node's kernel prepared on its device, so
  // `tandem plan` refuses what the first evaluation of `train` would.
  // Allocates nothing on a device.
  Result<void> check_evaluation() const;

  const model::ModelSpec& spec() const noexcept { return spec_; }
  const DeviceHandle& device() const noexcept { return device_; }
  const PluginRegistry& registry() const noexcept { return registry_; }
  const ProgramOptions& options() const noexcept { return options_; }
  const lowering::ModelGraph& model() const noexcept { return model_; }
  FeatureSet& features() noexcept { return *features_; }
  exec::Executor& executor() noexcept { return *executor_; }
  const exec::Executor& executor() const noexcept { return *executor_; }
  bool allocated() const noexcept { return executor_ != nullptr; }
  // The executor when it pipelines the micro-batches over the run's devices
  // (exec/pipelined_executor.hpp); nullptr otherwise.
  exec::PipelinedExecutor* pipeline() const noexcept;
  // The executor when it runs a step's micro-batches itself: pipelined over
  // this process's devices, or over the ranks of pipeline parallelism.
  exec::MicroBatchPipeline* micro_batch_pipeline() const noexcept;
  // The executor of this rank's pipeline stage (pipeline parallelism); nullptr otherwise.
  exec::RankPipelineExecutor* rank_pipeline() const noexcept;
  // Pipeline parallelism across ranks: the stage each layer is in (empty without it).
  std::map<std::string, size_t> layer_stages() const {
    return stages_ ? stages_->layer_stage : std::map<std::string, size_t>{};
  }
  // Why the micro-batches of a run on several devices run one after another
  // ("" when they are pipelined, or there is nothing to pipeline).
  const std::string& pipeline_declined() const noexcept { return pipeline_declined_; }
  // What the pipeline writes for one micro-batch, in its order: the batch,
  // its labels, and dropout's seed offset where the model has dropout.
  std::vector<exec::ConstBytes> micro_batch_inputs(exec::ConstBytes input, exec::ConstBytes labels,
                                                   const int64_t& dropout_offset) const;

  // Placement: none when everything runs on device(). The options it was
  // made with let an evaluation place its graph the same way.
  const std::optional<place::Placement>& placement() const noexcept { return placement_; }
  const place::PlacementOptions& placement_options() const noexcept { return placement_options_; }
  // What automatic placement chose (none: not automatic).
  const std::optional<place::AutoPlacement>& automatic_placement() const noexcept { return automatic_; }
  // auto | pinned | strict, as decided; and each layer's device (the first
  // of its nodes that has one), by layer name.
  const std::string& placement_mode() const noexcept { return placement_mode_; }
  std::map<std::string, std::string> layer_devices() const;
  // Every device of the run, by id, device() included.
  const std::map<std::string, const DeviceHandle*>& devices() const noexcept { return devices_.by_id(); }

  // The run's ranks, and how they share the work: the groups that split
  // the data, the ranks of a group that split the parallel layers.
  const ProcessGroup& group() const noexcept { return options_.group; }
  const ParallelLayout& layout() const noexcept { return layout_; }
  int data_rank() const noexcept { return layout_.data_rank; }
  int data_world() const noexcept { return layout_.data; }

  // Micro-batches per optimizer step (gradient accumulation) and samples in each.
  uint32_t micro_batches() const noexcept { return micro_batches_; }
  int64_t micro_batch_samples() const noexcept { return micro_batch_samples_; }
  // The optimizer phase: the first node after the global norm (nothing
  // from there on runs before the host has read it and written the clipping
  // coefficient), the gradients ranks average (as the optimizer reads them,
  // before clipping), and the optimizer nodes that run on a skipped step.
  size_t clip_point() const noexcept { return clip_point_; }
  const std::vector<ValueId>& synced_gradients() const noexcept { return synced_gradients_; }
  const std::vector<size_t>& run_on_skip() const noexcept { return run_on_skip_; }
  // The values streamed through the device (streamed_layers.hpp); empty:
  // everything resident.
  const std::set<std::string>& streamed() const noexcept { return streamed_; }

 private:
  Program(const model::ModelSpec& spec, const DeviceHandle& device, const PluginRegistry& registry,
          ProgramOptions options);
  Result<void> lower();
  Result<void> apply_features();
  // After the passes and placement: where the optimizer phase and clipping
  // start, which gradients ranks average, which nodes run on a skipped step.
  void locate_optimizer_phase();

  // program_streaming.cpp: what is streamed (ProgramOptions::streaming).
  struct StreamingFit {
    std::set<std::string> values;
    size_t layers = 0, of = 0;
    place::PlanEstimate estimate;
  };
  // The layers the model file or the choice streams whatever the budgets
  // (again once the gradients a data-parallel run all-reduces are known).
  void stream_as_asked();
  std::set<ValueId> kept_resident() const;
  // Auto: the fewest layers whose streaming makes the graph, all on
  // device(), fit `in`'s budgets; none when even all of them do not.
  Result<std::optional<StreamingFit>> fewest_streamed(place::EstimateInputs in) const;
  // One device over its budget or capacity: stream what makes it fit.
  Result<void> stream_to_fit();
  void adopt(const StreamingFit& fit, const std::string& why);
  // One device: its planned total with every streamable layer streamed
  // (for the advice of a run that does not fit); none where streaming
  // does not apply.
  std::optional<uint64_t> streamed_total() const;

  // program_placement.cpp: where every node runs, the copies between
  // devices, the devices to open (nothing placed: everything on device_).
  Result<void> place();
  Result<void> check_placement_with_ranks(const Result<place::Placement>& placement,
                                          const place::PlacementOptions& o) const;
  Result<bool> placement_wanted(std::vector<std::string>& candidates, place::PlacementOptions& o);
  Result<void> place_automatically(std::vector<std::string>& candidates, place::PlacementOptions& o);
  Result<void> prefer_streaming(place::AutoPlacement& chosen, const place::PlacementOptions& o,
                                const place::EstimateInputs& in);
  Result<std::vector<std::string>> candidate_devices() { return devices_.candidates(options_.devices); }
  Result<uint32_t> backend_abi_minor();
  // whole_memory: devices without a --memory-budget are limited by their
  // whole memory (else by what they have free, or held when they ran out).
  place::FitContext fit_context(bool whole_memory = false) const;
  place::EstimateInputs estimate_inputs(place::CostModel* costs, place::WorkspaceCache* workspaces,
                                        bool capacity) const;
  place::CostModelOptions cost_options() const;
  Result<void> replan_after_oom(const Error& oom);
  Result<std::unique_ptr<exec::Executor>> make_executor(exec::ExecutorOptions options) const;
  Result<std::unique_ptr<exec::Executor>> make_placed(const exec::ExecutorOptions& options) const;
  // A training step of several micro-batches on several devices whose
  // memory the host addresses, the model file not saying otherwise: what
  // make_placed pipelines (the plan counts the micro-batches in flight).
  bool pipeline_wanted() const;
  // The same for a placement on `devices` (before one is chosen).
  bool pipeline_possible(const std::vector<std::string>& devices) const;

  // program_stages.cpp: pipeline parallelism across ranks.
  struct Stages {
    std::vector<std::string> devices;  // stage k's name in the placement (place::stage_device)
    std::map<std::string, size_t> layer_stage;
    place::Placement placement;
    place::SplitGraph split;
  };
  Result<void> check_stages_compose() const;
  Result<std::map<std::string, double>> layer_costs() const;
  Result<std::vector<size_t>> cut_layers(size_t stages) const;
  Result<void> place_stages();
  std::string describe_stages() const;
  Result<std::unique_ptr<exec::Executor>> make_stage_executor(const exec::ExecutorOptions& options) const;

  // plan_report.cpp
  void write_ranks(std::ostream& out) const;
  Error stages_do_not_fit(const place::PlanEstimate& estimate) const;
  void write_layers(std::ostream& out) const;
  void write_copies(std::ostream& out) const;
  void write_streaming(std::ostream& out, const std::vector<place::DeviceEstimate>& plans) const;
  void write_pipeline(std::ostream& out, const place::PlanEstimate& estimate) const;

  const model::ModelSpec& spec_;
  const DeviceHandle& device_;
  const PluginRegistry& registry_;
  ProgramOptions options_;
  std::unique_ptr<FeatureSet> features_;
  ParallelLayout layout_;
  uint32_t micro_batches_ = 1;
  int64_t micro_batch_samples_ = 0;
  bool split_batches_ = false;  // a feature asked for micro-batches of a size
  lowering::ModelGraph model_;
  Graph unplaced_;  // the step graph before placement: a re-plan starts again from here

  RunDevices devices_;  // every device of the run, opened once, and what each can hold
  std::optional<place::Placement> placement_;
  place::PlacementOptions placement_options_;
  std::string placement_mode_ = "pinned";          // auto | pinned | strict, as decided
  std::optional<place::AutoPlacement> automatic_;  // what automatic placement chose
  std::optional<Stages> stages_;                   // pipeline parallelism across ranks
  bool force_automatic_ = false;                   // after running out of memory

  size_t clip_point_ = 0;
  std::vector<ValueId> synced_gradients_;
  std::vector<size_t> run_on_skip_;
  std::set<std::string> streamed_;
  std::unique_ptr<exec::Executor> executor_;
  mutable std::string pipeline_declined_;  // set by make_placed
};

}  // namespace tandem::host::program
