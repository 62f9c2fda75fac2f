// One training step of an allocated Program, as `tandem train` and `tandem
// bench` both run it: per micro-batch the per-step inputs (learning rate,
// AdamW's step count, dropout's seed offset) and the feature hooks; then the
// optimizer phase — the hooks' skip decision, clipping by the global norm,
// the updates. Forward and backward are the caller's (ranks overlap their
// all-reduces with backward there).
#pragma once

#include <functional>
#include <memory>

#include "program/executor_scalars.hpp"
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
  // After its forward and backward: the micro_batch_end hook.
  Result<void> end_micro_batch(int64_t step, uint32_t micro);
  // The optimizer phase of `step`, gradients averaged over ranks already.
  Result<void> optimizer_step(int64_t step);
  // Tensor parallelism: every rank must skip the same optimizer steps, but
  // a feature decides on this rank's gradients, which for the split layers
  // are only its slices (amp's overflow check). With `max_over_ranks` (the
  // maximum of a value over every rank), optimizer_step compares the
  // decisions and stops the run, naming the step, when the ranks differ.
  void check_skips_agree(std::function<Result<int32_t>(int32_t)> max_over_ranks) {
    max_over_ranks_ = std::move(max_over_ranks);
  }

 private:
  tdm_step_info info(int64_t step, uint32_t micro) const;
  Result<void> skip_agreed(int64_t step, bool skip) const;

  Program& program_;
  std::unique_ptr<ExecutorScalars> scalars_;  // what feature hooks read and write
  std::function<Result<int32_t>(int32_t)> max_over_ranks_;
};

}  // namespace tandem::host::program
