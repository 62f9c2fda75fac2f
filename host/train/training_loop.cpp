// Trainer::run: epochs of steps over the loader's batches, progress,
// evaluation and a checkpoint at each epoch end, a checkpoint and a clean
// stop on a signal, and the run's closing reports.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "train/evaluator.hpp"
#include "train/lr_schedule.hpp"
#include "train/trainer.hpp"
#include "util/logger.hpp"

namespace tandem::host::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

// What one run() keeps between its epochs.
struct Trainer::Loop {
  data::DataLoader& loader;
  Progress& progress;
  Evaluator& evaluator;
  int64_t per_epoch = 0;  // loader batches (micro-batches) per epoch
  int64_t total = 0;      // optimizer steps of the whole run
  int64_t epochs = 0;
  int64_t step = 0, epoch = 0, first_batch = 0;
  int64_t index = 0;  // the epoch's next batch
  Clock::time_point epoch_start;
  int64_t saved_step = 0;  // the last checkpoint's step, and when it was saved
  Clock::time_point saved_at = Clock::now();
  StepReport report;
  TrainResult result;
};

Result<TrainResult> Trainer::run() {
  const int64_t batch = program_->micro_batch_samples();  // one loader batch: a micro-batch
  const uint32_t micro = program_->micro_batches();
  data::DataLoader loader(data_.train, {.batch_size = batch,
                                        .shuffle = true,
                                        .drop_last = true,
                                        .augment = true,
                                        .seed = spec_.train.seed,
                                        .threads = options_.loader_threads,
                                        .prefetch = static_cast<int>(spec_.data.prefetch),
                                        .transforms = data_.transforms,
                                        .shard_rank = program_->data_rank(),
                                        .shard_count = program_->data_world()});
  const int64_t per_epoch = loader.batches_per_epoch();
  const int64_t steps_per_epoch = per_epoch / micro;
  if (steps_per_epoch == 0)
    return make_error(data_.train.source + ": one epoch has " + std::to_string(per_epoch) +
                          " batches, fewer than the " + std::to_string(micro) +
                          " micro-batches of one accumulated step",
                      TDM_INVALID_ARGUMENT);
  const bool leader = program_->group().rank == 0;  // only rank 0 reports
  Progress progress(options_.live_progress, spec_.train.log_every,
                    leader ? (std::filesystem::path(options_.run_dir) / "metrics.jsonl").string() : "",
                    !leader);
  if (auto why = progress.metrics_error())
    return make_error(*why + "; give another --run-dir", TDM_INVALID_ARGUMENT);
  if (!options_.tensorboard.empty())
    if (auto r = progress.write_tensorboard_to(options_.tensorboard); !r)
      return make_error("--tensorboard " + r.error().message + "; give a directory that can be written",
                        TDM_INVALID_ARGUMENT);
  memory_->record_placement(progress);
  if (spec_.language_model()) progress.report_perplexity(spec_.byte_level());
  Evaluator evaluator = make_evaluator();
  Loop loop{loader, progress, evaluator};
  loop.per_epoch = per_epoch;
  loop.total = spec_.train.steps > 0 ? spec_.train.steps : spec_.train.epochs * steps_per_epoch;
  loop.epochs = (loop.total + steps_per_epoch - 1) / steps_per_epoch;
  loop.step = start_step_, loop.epoch = start_epoch_, loop.first_batch = start_batch_;
  loop.saved_step = start_step_;
  total_steps_ = loop.total;
  if (auto r = explain_resume(loop); !r) return r.error();
  const auto run_start = Clock::now();
  while (loop.step < loop.total) {
    auto finished = train_epoch(loop);
    if (!finished) return finished.error();
    if (!*finished) return loop.result;  // stopped by a signal, checkpoint saved
    if (auto r = end_epoch(loop, loop.index + micro > per_epoch); !r) return r.error();
  }
  if (auto r = finish_run(loop, run_start); !r) return r.error();
  return loop.result;
}

// Evaluation shares the training executor's parameters and places its
// graphs as training placed them.
Evaluator Trainer::make_evaluator() const {
  std::map<std::string, void*> shared;
  std::set<std::string> streamed;  // shared from their homes in host memory
  const Graph& g = model().graph;
  const exec::Executor& executor = program_->executor();
  for (size_t i = 0; i < g.value_count(); ++i) {
    const Value& v = *g.value_at(i);
    if (v.kind != TDM_VALUE_PARAMETER && v.kind != TDM_VALUE_STATE) continue;
    if (void* home = executor.stream_home(v.id)) {
      shared[v.name] = home;
      streamed.insert(v.name);
    } else {
      shared[v.name] = executor.device_pointer(v.id);
    }
  }
  Evaluator evaluator(spec_, device_, registry_, std::move(shared));
  evaluator.use_streamed(std::move(streamed));
  if (program_->placement()) evaluator.use_placement(program_->placement_options(), program_->devices());
  if (model().tensor_parallel.size > 1)
    evaluator.use_tensor_parallelism(program_->group(), &ranks_->tensor());
  if (model().zero.shards_parameters()) evaluator.use_zero(program_->group(), &ranks_->data());
  if (!program_->layer_stages().empty()) {
    evaluator.use_placement(program_->placement_options(), program_->devices());
    evaluator.use_pipeline(program_->group(), ranks_->pipeline());
  }
  return evaluator;
}

Result<bool> Trainer::train_epoch(Loop& loop) {
  const uint32_t micro_batches = program_->micro_batches();
  loop.loader.start_epoch(static_cast<uint64_t>(loop.epoch), loop.first_batch);
  loop.loader.reset_wait();
  loop.epoch_start = Clock::now();
  loop.index = loop.first_batch;
  loop.report = StepReport{
      .epoch = loop.epoch + 1, .epochs = loop.epochs, .batches = loop.per_epoch, .total_steps = loop.total};
  EpochTotals totals;
  std::shared_ptr<const data::Batch> ahead;  // staged; never carried across epochs
  // One optimizer step takes `micro_batches` batches; an epoch ends when
  // fewer than that remain, so no step ever straddles two epochs.
  while (loop.step < loop.total && loop.index + micro_batches <= loop.per_epoch) {
    auto step_loss = train_step(loop, totals, ahead);
    if (!step_loss) return step_loss.error();
    if (auto r = steps_->optimizer_step(loop.step); !r) return r.error();
    ++loop.step;
    if (auto r = report_step(loop, totals); !r) return r.error();
    if (!std::isnan(*step_loss)) loop.result.last_loss = *step_loss;
    if (auto why = loop.progress.output_error())
      return make_error(
          *why + " at step " + std::to_string(loop.step) + "; the last checkpoint " +
              (loop.result.last_checkpoint.empty() ? "(none yet)" : loop.result.last_checkpoint) +
              " continues the run (--resume) once the disk has room",
          TDM_UNAVAILABLE);
    auto after = after_step(loop);
    if (!after) return after.error();
    // A checkpoint is written only of a run whose loss is known to be finite.
    if (*after != AfterStep::Continue)
      if (auto r = drain_stats(totals); !r) return r.error();
    if (*after == AfterStep::Save) {
      auto saved = save(loop.step, loop.epoch, loop.index);
      if (!saved) return saved.error();
      loop.result.last_checkpoint = *saved;
      loop.saved_step = loop.step;
      loop.saved_at = Clock::now();
    }
    if (*after == AfterStep::Stop) {
      auto saved = save(loop.step, loop.epoch, loop.index);
      if (!saved) return saved.error();
      loop.progress.line("interrupted: checkpoint saved to " + *saved + "; continue with: tandem train " +
                         spec_.path + " --resume " + options_.run_dir);
      loop.result.interrupted = true;
      loop.result.last_checkpoint = *saved;
      if (auto r = steps_->end_run(loop.step); !r) return r.error();
      loop.result.steps = loop.step;
      return false;
    }
  }
  return true;
}

// The micro-batches of one optimizer step, forward and backward; returns
// the step's loss. The next micro-batch is staged while one runs, within
// the epoch.
Result<double> Trainer::train_step(Loop& loop, EpochTotals& totals,
                                   std::shared_ptr<const data::Batch>& ahead) {
  const uint32_t micro_batches = program_->micro_batches();
  double step_loss = 0;
  const bool on_device = model().train_stats != kNoValue;
  // The run's last step reads its loss (Result::last_loss) as without train_stats.
  const bool read_loss = !on_device || loop.step + 1 == loop.total;
  if (on_device && totals.pending_micro == 0) totals.pending_from = loop.step;
  if (program_->micro_batch_pipeline() != nullptr)
    return pipelined_step(loop.loader, loop.step, loop.total, loop.index, totals, read_loss);
  for (uint32_t micro = 0; micro < micro_batches; ++micro) {
    const bool staged = ahead != nullptr;
    std::shared_ptr<const data::Batch> b = std::move(ahead);
    if (!b) b = next_batch(loop.loader);
    if (!b) return make_error("the data loader ended an epoch early (internal)", TDM_INTERNAL);
    const bool another = micro + 1 < micro_batches ||
                         (loop.step + 1 < loop.total && loop.index + 1 + micro_batches <= loop.per_epoch);
    if (options_.prefetch && another) {
      ahead = next_batch(loop.loader);
      if (!ahead) return make_error("the data loader ended an epoch early (internal)", TDM_INTERNAL);
    }
    auto loss = micro_step(*b, staged, ahead.get(), loop.step, micro, loop.total, totals.correct, read_loss);
    if (!loss) return loss.error();
    ++loop.index;
    totals.count(*b, on_device, *loss);
    step_loss += *loss / micro_batches;
  }
  return read_loss ? step_loss : std::nan("");
}

std::shared_ptr<const data::Batch> Trainer::next_batch(data::DataLoader& loader) {
  const auto wait_start = Clock::now();
  auto b = loader.next();
  profiler_->data_wait(wait_start, Clock::now());
  return b;
}

Result<void> Trainer::report_step(Loop& loop, EpochTotals& totals) {
  const bool status = options_.status_request != nullptr && options_.status_request->exchange(false);
  if (status || stats_due(loop, totals))
    if (auto r = drain_stats(totals); !r) return r;
  const double elapsed = seconds_since(loop.epoch_start);
  StepReport& report = loop.report;
  report.batch = loop.index;
  report.step = loop.step;
  // Between reads of the device's sums (train_stats): the last ones read.
  if (totals.seen > 0) {
    report.loss = totals.loss_sum / static_cast<double>(totals.seen);
    report.accuracy = static_cast<double>(totals.correct) / static_cast<double>(totals.predictions);
  }
  report.lr = learning_rate(spec_.train, loop.step - 1, loop.total);
  report.samples_per_second = static_cast<double>(totals.all_seen()) / elapsed;
  report.data_wait_fraction = loop.loader.wait_seconds() / elapsed;
  report.eta_seconds = elapsed / static_cast<double>(totals.all_seen()) *
                       static_cast<double>((loop.total - loop.step) * program_->micro_batch_samples() *
                                           program_->micro_batches());
  loop.progress.step(report);
  if (status) loop.progress.status(report);
  return {};
}

bool Trainer::stats_due(const Loop& loop, const EpochTotals& totals) const {
  if (totals.pending_micro == 0) return false;
  const uint32_t micro = program_->micro_batches();
  const bool epoch_ends = loop.step >= loop.total || loop.index + micro > loop.per_epoch;
  // f32 counts rows exactly up to 2^24: read before the next step could pass it.
  const int64_t per_step = totals.pending_predictions / std::max<int64_t>(1, loop.step - totals.pending_from);
  const bool near_exact_limit = totals.pending_predictions + per_step > (int64_t{1} << 24);
  return loop.step % spec_.train.log_every == 0 || epoch_ends || near_exact_limit;
}

Result<void> Trainer::end_epoch(Loop& loop, bool epoch_done) {
  double val_loss = -1, val_acc = -1;
  const data::Dataset* eval_set = data_.validation ? &*data_.validation : data_.test ? &*data_.test : nullptr;
  if (memory_->training_peaks().empty()) memory_->note_training_peaks();
  if (eval_set != nullptr && (epoch_done || loop.step >= loop.total)) {
    auto ev = loop.evaluator.evaluate(*eval_set, data_.transforms, options_.loader_threads);
    if (!ev) return ev.error();
    val_loss = ev->loss;
    val_acc = ev->accuracy;
    (data_.validation ? loop.result.validation_accuracy : loop.result.test_accuracy) = ev->accuracy;
  }
  loop.progress.epoch(loop.report, val_loss, val_acc, seconds_since(loop.epoch_start));
  loop.result.samples_per_second = loop.report.samples_per_second;
  if (epoch_done) {
    ++loop.epoch;
    loop.first_batch = 0;
  } else {
    loop.first_batch = loop.index;
  }
  auto saved = save(loop.step, loop.epoch, loop.first_batch);
  if (!saved) return saved.error();
  loop.result.last_checkpoint = *saved;
  loop.saved_step = loop.step;
  loop.saved_at = Clock::now();
  return {};
}

Result<void> Trainer::explain_resume(Loop& loop) {
  if (resumed_file_.empty()) return {};
  loop.result.last_checkpoint = resumed_file_;
  if (loop.step >= loop.total) {
    loop.progress.line(resumed_file_ + " is at step " + std::to_string(loop.step) + " of " +
                       std::to_string(loop.total) +
                       ": the run is finished, nothing to train (to train longer, "
                       "raise [train] steps or epochs, e.g. --set train.epochs=...)");
    return {};
  }
  loop.progress.line("resuming from " + resumed_file_ + " at step " + std::to_string(loop.step) + " of " +
                     std::to_string(loop.total));
  // The schedule follows the run's length: another length changes the rate
  // from this step on (cosine decays to its end; warm-up is unchanged).
  if (resumed_total_ > 0 && resumed_total_ != loop.total && program_->group().rank == 0) {  // said once
    const double before = learning_rate(spec_.train, loop.step, resumed_total_);
    const double now = learning_rate(spec_.train, loop.step, loop.total);
    std::ostringstream text;
    text << "resuming a run planned for " << resumed_total_ << " steps as one of " << loop.total
         << " steps (its [train] steps or epochs changed)";
    if (before != now)
      text << ": the " << spec_.train.schedule << " learning-rate schedule is now spread over " << loop.total
           << " steps, so the rate at step " << loop.step + 1 << " is " << now << " where it would have been "
           << before;
    log_warning(text.str());
  }
  return {};
}

Result<void> Trainer::finish_run(Loop& loop, std::chrono::steady_clock::time_point run_start) {
  if (auto r = steps_->end_run(loop.step); !r) return r;
  if (data_.validation && data_.test) {
    auto ev = loop.evaluator.evaluate(*data_.test, data_.transforms, options_.loader_threads);
    if (!ev) return ev.error();
    loop.result.test_accuracy = ev->accuracy;
  }
  loop.result.steps = loop.step;
  loop.result.seconds = seconds_since(run_start);
  memory_->record(loop.progress);
  const bool leader = program_->group().rank == 0;
  if (options_.memory_report && leader) memory_->report(loop.step - start_step_);
  if (exec::RankPipelineExecutor* stages = program_->rank_pipeline(); stages && options_.memory_report) {
    auto times = stages->stage_times();  // every rank takes part
    if (!times) return times.error();
    if (leader) memory_->report_stages(*times, stages->layout().micro_batches);
  }
  if (exec::RankPipelineExecutor* stages = program_->rank_pipeline(); stages && !options_.profile.empty())
    if (auto r = stages->gather_spans(); !r) return r;  // every rank takes part
  if (!options_.profile.empty() && leader) {
    if (auto r = profiler_->write(options_.profile, model().graph, executor(), device_.id()); !r) return r;
    profiler_->print_summary(std::cout, model().graph, executor());
  }
  return {};
}

Result<Trainer::AfterStep> Trainer::after_step(const Loop& loop) {
  AfterStep wanted = AfterStep::Continue;
  if (options_.stop != nullptr && options_.stop->load()) {
    wanted = AfterStep::Stop;
  } else if (const model::CheckpointEvery& every = spec_.train.checkpoint_every; every.any()) {
    const bool by_steps = every.steps > 0 && loop.step - loop.saved_step >= every.steps;
    const bool by_time = every.seconds > 0 &&
                         std::chrono::duration<double>(Clock::now() - loop.saved_at).count() >= every.seconds;
    if (by_steps || by_time) wanted = AfterStep::Save;
  }
  if (ranks_->alone()) return wanted;
  // Every rank does the same after the same step, or the collectives of a
  // save or of the next step would mismatch.
  auto agreed = ranks_->max(static_cast<int32_t>(wanted));
  if (!agreed) return agreed.error();
  return static_cast<AfterStep>(*agreed);
}

}  // namespace tandem::host::train
