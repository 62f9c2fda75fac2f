// One training step of an allocated Program, as `tandem train` and `tandem
// bench` both run it: per micro-batch the per-step inputs (learning rate,
// AdamW's step count, dropout's seed offset) and the feature hooks; then the
// optimizer phase — the hooks' skip decision, clipping by the global norm,
// the updates. Forward and backward are the caller's (ranks overlap their
// all-reduces with backward there).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "program/executor_run.hpp"
#include "program/program.hpp"

namespace tandem::host::program {

class StepRunner {
 public:
  explicit StepRunner(Program& program);

  // Before micro-batch `micro` of optimizer step `step` (from 0): on the
  // first micro-batch the learning rate `lr`, AdamW's step and the
  // step_begin hook; on every one dropout's seed offset, so every
  // micro-batch and every rank draws its own masks.
  Result<void> begin_micro_batch(int64_t step, uint32_t micro, double lr);
  // Dropout's seed offset of micro-batch `micro` of `step`: every
  // micro-batch and every rank draws its own masks.
  int64_t dropout_offset(int64_t step, uint32_t micro) const;
  // After its forward and backward: the micro_batch_end hook.
  Result<void> end_micro_batch(int64_t step, uint32_t micro);
  // The optimizer phase of `step`, gradients averaged over ranks already.
  Result<void> optimizer_step(int64_t step);
  // A run of several ranks (data or tensor parallelism): `max_over_ranks`
  // is the maximum of a value over every rank. Feature hooks reach it
  // through run_ranks_max, to decide as one (amp's overflow check sees only
  // this rank's gradients: its slices of the split layers', or its own
  // before they are averaged). Every rank must skip the same optimizer
  // steps, so when a feature decides to skip, optimizer_step also compares
  // the ranks' decisions and stops the run, naming the step, when they
  // differ (a feature that decides alone).
  void set_ranks(std::function<Result<int32_t>(int32_t)> max_over_ranks);
  // Where features write their files (run_save_tensors), and whether this
  // rank writes them (the run's first rank).
  void set_run_directory(std::string directory, bool writes);
  // How the run's ranks make a file's tensors whole (ExecutorRun::MakeWhole).
  void set_make_whole(ExecutorRun::MakeWhole make_whole, bool takes_part);
  // After the run's last step (and its checkpoint), or the checkpoint of a
  // stop by signal: the run_end hook. `steps`: optimizer steps taken.
  Result<void> end_run(int64_t steps);

 private:
  tdm_step_info info(int64_t step, uint32_t micro) const;
  Result<void> skip_agreed(int64_t step, bool skip) const;

  Program& program_;
  std::unique_ptr<ExecutorRun> run_;  // what feature hooks read and write
  bool check_skips_ = false;          // several ranks, and some feature decides skips
};

}  // namespace tandem::host::program
