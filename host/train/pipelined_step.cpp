// Trainer::pipelined_step: the micro-batches of one optimizer step handed
// to the pipeline at once (exec/micro_batch_pipeline.hpp), which runs them
// on every device, or every stage's rank, at the same time; then what
// micro_step does after each.
#include <cmath>

#include "train/evaluator.hpp"
#include "train/lr_schedule.hpp"
#include "train/trainer.hpp"
#include "util/logger.hpp"

namespace tandem::host::train {

Result<double> Trainer::pipelined_step(data::DataLoader& loader, int64_t step, int64_t total, int64_t& index,
                                       EpochTotals& totals, bool read_loss) {
  exec::MicroBatchPipeline& pipeline = *program_->micro_batch_pipeline();
  const lowering::ModelGraph& m = model();
  const uint32_t micro_batches = program_->micro_batches();
  const bool on_device = m.train_stats != kNoValue;
  std::vector<std::shared_ptr<const data::Batch>> batches;
  for (uint32_t i = 0; i < micro_batches; ++i) {
    auto b = next_batch(loader);
    if (!b) return make_error("the data loader ended an epoch early (internal)", TDM_INTERNAL);
    batches.push_back(std::move(b));
  }
  if (auto r = steps_->begin_micro_batch(step, 0, learning_rate(spec_.train, step, total)); !r)
    return r.error();
  // Per micro-batch: its batch, its labels, dropout's seed offset (the
  // order of the program's PipelineRequest); the loss, and the logits
  // where the device does not count what it predicted right.
  std::vector<int64_t> offsets(micro_batches);
  std::vector<std::vector<exec::ConstBytes>> inputs(micro_batches);
  for (uint32_t i = 0; i < micro_batches; ++i) {
    const data::Batch& b = *batches[i];
    offsets[i] = steps_->dropout_offset(step, i);
    inputs[i] = program_->micro_batch_inputs(
        {b.input_data(), b.input_bytes()}, {b.labels.data(), b.labels.size() * sizeof(int32_t)}, offsets[i]);
  }
  std::vector<ValueId> outputs;
  if (!on_device || read_loss) outputs.push_back(m.loss);
  if (!on_device) outputs.push_back(m.logits);
  const int64_t classes = m.graph.value(m.logits)->type.dims.back();
  std::vector<float> losses(micro_batches, 0.0f);
  std::vector<std::vector<float>> logits(micro_batches);
  std::vector<std::vector<exec::MutableBytes>> results(micro_batches);
  for (uint32_t i = 0; i < micro_batches; ++i) {
    if (!outputs.empty()) results[i].push_back({&losses[i], sizeof(float)});
    if (on_device) continue;
    logits[i].resize(batches[i]->labels.size() * size_t(classes));
    results[i].push_back({logits[i].data(), logits[i].size() * sizeof(float)});
  }
  // Within a process ranks place on one device each (Program::place); a
  // stage of pipeline parallelism averages its gradients with the same
  // stage of the other pipelines once every micro-batch is done.
  if (streamed_ || (allreduce_ && program_->layer_stages().empty()))
    return make_error("a pipelined run with data-parallel ranks (internal: ranks place on one device each)",
                      TDM_INTERNAL);
  if (auto r = pipeline.run_micro_batches(inputs, outputs, results); !r) {
    // The other stages wait on this one: the rank's failure ends its process
    // (tandem train), and the launcher then ends the job.
    if (const exec::RankPipelineExecutor* stages = program_->rank_pipeline(); stages && stages->stranded())
      return make_error(r.error().message + " (pipeline stage " +
                            std::to_string(program_->layout().pipeline_rank) +
                            "; the other stages wait on it: this rank stops now so that the launcher ends "
                            "the job)",
                        r.error().status);
    return r.error();
  }
  if (allreduce_) {
    for (size_t b = 0; b < allreduce_->buckets().size(); ++b) allreduce_->start(b);
    if (auto r = allreduce_->finish(); !r) return r.error();
  }
  double step_loss = 0;
  for (uint32_t i = 0; i < micro_batches; ++i) {
    if (auto r = steps_->end_micro_batch(step, i); !r) return r.error();
    const data::Batch& b = *batches[i];
    ++index;
    if (!outputs.empty() && !std::isfinite(losses[i]))
      return diverged(losses[i], "at step " + std::to_string(step + 1));
    step_loss += losses[i] / micro_batches;
    totals.count(b, on_device, losses[i]);
    if (!on_device) totals.correct += count_correct(logits[i], b.labels, int64_t(b.labels.size()), classes);
  }
  return read_loss ? step_loss : std::nan("");
}

}  // namespace tandem::host::train
