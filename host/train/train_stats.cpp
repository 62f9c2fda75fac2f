// Training's loss and accuracy from the device's running sums
// (lowering::ModelGraph::train_stats): read at the log interval, not after
// every micro-batch, and without the logits.
#include <cmath>
#include <string>

#include "train/trainer.hpp"

namespace tandem::host::train {

Error Trainer::diverged(double loss, const std::string& when) {
  return make_error("the loss became " + std::to_string(loss) + " " + when +
                        ": training diverged; lower [train] lr, add clip_grad_norm, or check the data "
                        "(--check-numerics names the first node whose output is not finite)",
                    TDM_ABORTED);
}

Result<void> Trainer::drain_stats(EpochTotals& totals) {
  const ValueId stats = model().train_stats;
  if (stats == kNoValue || totals.pending_micro == 0) return {};
  exec::Executor& ex = executor();
  float sums[2] = {0, 0};
  if (auto r = ex.read(stats, sums, sizeof sums); !r) return r;
  const float zeros[2] = {0, 0};
  if (auto r = ex.write(stats, zeros, sizeof zeros); !r) return r;
  if (!std::isfinite(sums[0]))
    return diverged(
        sums[0], "in steps " + std::to_string(totals.pending_from + 1) + " to " +
                     std::to_string(totals.pending_from + totals.pending_micro / program_->micro_batches()) +
                     " (--set train.log_every=1 narrows it to one)");
  // Every micro-batch has the same samples (the loader drops a short last
  // batch), so the mean of the micro-batch means weighs each sample once.
  totals.loss_sum += static_cast<double>(sums[0]) * static_cast<double>(totals.pending_samples) /
                     static_cast<double>(totals.pending_micro);
  totals.correct += std::llround(sums[1]);
  totals.seen += totals.pending_samples;
  totals.predictions += totals.pending_predictions;
  totals.pending_micro = totals.pending_samples = totals.pending_predictions = 0;
  return {};
}

}  // namespace tandem::host::train
