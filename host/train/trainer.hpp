// `tandem train`: the training loop around a Program (program/program.hpp),
// which holds the step graph, its placement and its executors.
//
// Per step: the loader's next batch is copied in (or was staged during the
// step before), the step's inputs and feature hooks run (StepRunner),
// forward and backward run with each gradient bucket's all-reduce started
// as soon as backward has finished it (data parallelism), then the
// optimizer phase; loss and accuracy are read back. At each epoch end the
// validation and test sets are evaluated and a checkpoint is saved.
// Everything random is a function of (seed, step/epoch, sample), so a
// resumed run is bit-identical to an uninterrupted one.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/loader.hpp"
#include "program/program.hpp"
#include "program/step_runner.hpp"
#include "train/datasets.hpp"
#include "train/distributed.hpp"
#include "train/evaluator.hpp"
#include "train/memory_report.hpp"
#include "train/overlapped_allreduce.hpp"
#include "train/profile_report.hpp"
#include "train/progress.hpp"
#include "train/run_checkpoints.hpp"
#include "train/run_directory.hpp"
#include "train/run_ranks.hpp"
#include "train/streamed_allreduce.hpp"

namespace tandem::host::train {

struct TrainOptions {
  std::string run_dir;    // metrics.jsonl and checkpoints/ go here
  std::string resume;     // a run directory or a checkpoint file to continue from
  std::string init_from;  // a checkpoint to take weights from (not optimizer state)
  std::string profile;    // Chrome/Perfetto trace file to write
  // A directory for TensorBoard event files (empty: none).
  std::string tensorboard;
  // Debugging: every node's floating outputs checked for values that are
  // not finite, and/or filled with NaN before it runs; a guard after every
  // output checked for writes past its end (exec/numerics_guard.hpp).
  bool check_numerics = false;
  bool poison_outputs = false;
  bool check_bounds = false;
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
  // Bytes each device may hold, by device id ("onednn:0"); absent: no limit.
  std::map<std::string, uint64_t> memory_budgets;
  // Which layers' parameters, gradients and optimizer state are streamed
  // from host memory (program::ProgramOptions::streaming, stream_depth).
  program::StreamChoice streaming = program::StreamChoice::Auto;
  size_t stream_depth = 1;
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
  // With ZeRO: "sharded" (the default: each rank writes its shards,
  // sharded_checkpoint.hpp) or "whole" (rank 0 gathers one file).
  std::string checkpoint_format = "sharded";
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

// The program's options for a training run with `options`, as this process
// (its launcher's ranks) runs it.
program::ProgramOptions program_options(const TrainOptions& options);

class Trainer {
 public:
  static Result<std::unique_ptr<Trainer>> create(const model::ModelSpec& spec, const DeviceHandle& device,
                                                 const PluginRegistry& registry, TrainOptions options);
  ~Trainer();
  Result<TrainResult> run();

  const program::Program& program() const { return *program_; }
  const lowering::ModelGraph& model() const { return program_->model(); }
  // This process's place among the ranks (rank 0 of 1 alone).
  const program::ProcessGroup& group() const { return program_->group(); }
  exec::Executor& executor() { return program_->executor(); }
  // What each device's allocator held at most during the training steps of
  // the last run(), before evaluation (by device id; empty before a run).
  const std::map<std::string, uint64_t>& training_peaks() const { return memory_->training_peaks(); }
  // The assignment automatic placement chose (none: not automatic).
  const std::optional<place::AutoPlacement>& automatic_placement() const {
    return program_->automatic_placement();
  }

 private:
  struct Loop;  // what one run() keeps between epochs (training_loop.cpp)
  struct EpochTotals {
    double loss_sum = 0;
    int64_t seen = 0, correct = 0, predictions = 0;  // predictions: labels (tokens of a language model)
    // Micro-batches whose loss and count still lie in the device's running
    // sums (model().train_stats), from step `pending_from` on.
    int64_t pending_micro = 0, pending_samples = 0, pending_predictions = 0, pending_from = 0;
    int64_t all_seen() const { return seen + pending_samples; }
    // One micro-batch trained: its loss and counts still on the device
    // (`pending`), or read (`loss`, its mean over the batch).
    void count(const data::Batch& b, bool pending, double loss) {
      const auto labels = static_cast<int64_t>(b.labels.size());
      if (pending) {
        ++pending_micro;
        pending_samples += b.size;
        pending_predictions += labels;
      } else {
        seen += b.size;
        predictions += labels;
        loss_sum += loss * static_cast<double>(b.size);
      }
    }
  };
  // The loader's next batch, its wait recorded for the profile.
  std::shared_ptr<const data::Batch> next_batch(data::DataLoader& loader);

  Trainer(const model::ModelSpec& spec, const DeviceHandle& device, const PluginRegistry& registry,
          TrainOptions options);
  Result<void> load_data();
  exec::NumericsOptions numerics_options() const;
  Result<void> prepare_run();
  // Data parallelism: allreduce_ or streamed_, for these buckets.
  Result<void> make_allreduce(std::vector<GradientBucket> buckets);
  Result<void> resume_from(const std::string& path, bool weights_only);
  void continue_with_other_ranks(int64_t saved_world);

  // training_loop.cpp. One epoch's steps; false when the run stopped on a
  // signal (`loop.result` says where).
  Result<bool> train_epoch(Loop& loop);
  // The step's loss, or NaN where the loss stays on the device (train_stats).
  Result<double> train_step(Loop& loop, EpochTotals& totals, std::shared_ptr<const data::Batch>& ahead);
  Result<void> report_step(Loop& loop, EpochTotals& totals);
  // train_stats.cpp. Whether the device's running sums are read after this
  // step: at each log interval, a status request, the run's last step,
  // and before an f32 count could pass 2^24.
  bool stats_due(const Loop& loop, const EpochTotals& totals) const;
  // Reads the running sums into `totals` and clears them (one read of two
  // floats); an error when the loss is no longer finite.
  Result<void> drain_stats(EpochTotals& totals);
  // The error of a loss that is no longer finite, `when` it was seen ("at
  // step 12", "in steps 11 to 20").
  static Error diverged(double loss, const std::string& when);
  Result<void> finish_run(Loop& loop, std::chrono::steady_clock::time_point run_start);
  Evaluator make_evaluator() const;
  // Forward and backward of one micro-batch; returns its loss. `staged`:
  // the batch was staged during the previous micro-batch (use it, do not
  // write it); `next`: the batch to stage while this one runs (or null).
  // With train_stats the loss is read only when `read_loss` (NaN otherwise)
  // and the logits never: the device counts what was predicted right.
  Result<double> micro_step(const data::Batch& batch, bool staged, const data::Batch* next, int64_t step,
                            uint32_t micro, int64_t total_steps, int64_t& correct, bool read_loss);
  Result<void> write_batch(const data::Batch& batch, bool staged, const data::Batch* next);
  // pipelined_step.cpp: train_step's micro-batches handed to the pipeline
  // at once (Program::micro_batch_pipeline()).
  Result<double> pipelined_step(data::DataLoader& loader, int64_t step, int64_t total, int64_t& index,
                                EpochTotals& totals, bool read_loss);
  // Nodes [0, optimizer_begin): forward and backward, with each gradient
  // bucket's all-reduce started once backward has finished it. With
  // streamed_ nothing is waited for on the host: the compute stream waits on
  // the comm stream, and the optimizer's run synchronises.
  Result<void> forward_backward(bool last_micro_batch);
  // What every rank does after this step, agreed between them: a rank asked
  // to stop stops all, a checkpoint due on one is saved by all.
  enum class AfterStep { Continue = 0, Save = 1, Stop = 2 };
  Result<AfterStep> after_step(const Loop& loop);
  // Before the first step: what the run continues (a finished run, a
  // changed schedule), said once.
  Result<void> explain_resume(Loop& loop);
  Result<void> end_epoch(Loop& loop, bool epoch_done);

  // The checkpoint of this position (every rank calls it); the path rank 0 wrote.
  Result<std::string> save(int64_t step, int64_t epoch, int64_t next_batch);

  const model::ModelSpec& spec_;
  const DeviceHandle& device_;
  const PluginRegistry& registry_;
  TrainOptions options_;
  RunData data_;
  std::unique_ptr<program::Program> program_;
  std::unique_ptr<program::StepRunner> steps_;
  // The communicators (none alone); the executor's zero.* and comm.*
  // nodes, and the gradient averaging below, use them.
  std::optional<RunRanks> ranks_;
  // A run of several ranks, for data parallelism: one of the two. Declared after
  // program_, so destroyed before the executor whose gradients they use.
  std::unique_ptr<OverlappedAllReduce> allreduce_;  // host memory, or no stream to order against
  std::unique_ptr<StreamedAllReduce> streamed_;     // device memory, on a comm stream
  std::optional<RunCheckpoints> checkpoints_;       // how the ranks write and read them
  std::unique_ptr<ProfileRecorder> profiler_;
  std::optional<RunDirectory> run_directory_;  // locked for the run's life (rank 0)
  int64_t start_step_ = 0, start_epoch_ = 0, start_batch_ = 0;
  std::string resumed_file_;   // the checkpoint --resume continued from
  int64_t resumed_total_ = 0;  // the optimizer steps that run was planned for (0: not recorded)
  int64_t total_steps_ = 0;    // this run's optimizer steps, recorded in its checkpoints
  std::vector<float> logits_;
  std::optional<RunMemory> memory_;
};

}  // namespace tandem::host::train
