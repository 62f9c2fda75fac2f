#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "hub/hf_config.hpp"
#include "plugin/optional_call.hpp"
#include "train/checkpointing.hpp"
#include "train/evaluator.hpp"
#include "train/initializers.hpp"
#include "train/lr_schedule.hpp"
#include "train/sharded_checkpoint.hpp"
#include "util/logger.hpp"

namespace tandem::host::train {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

program::ProgramOptions program_options(const TrainOptions& options) {
  program::ProgramOptions o;
  o.group = program::detect_process_group();
  o.devices = options.devices;
  o.memory_budgets = options.memory_budgets;
  o.cost_cache_dir = options.cost_cache_dir;
  o.cost_context = options.cost_context;
  o.recalibrate = options.recalibrate;
  o.prefetch = options.prefetch;
  o.streaming = options.streaming;
  o.stream_depth = options.stream_depth;
  return o;
}

Trainer::Trainer(const model::ModelSpec& spec, const DeviceHandle& device, const PluginRegistry& registry,
                 TrainOptions options)
    : spec_(spec), device_(device), registry_(registry), options_(std::move(options)) {}

Trainer::~Trainer() = default;

Result<std::unique_ptr<Trainer>> Trainer::create(const model::ModelSpec& spec, const DeviceHandle& device,
                                                 const PluginRegistry& registry, TrainOptions options) {
  std::unique_ptr<Trainer> t(new Trainer(spec, device, registry, std::move(options)));
  // What would only fail late fails now: the run directory is taken (and
  // writable), the profile can be written.
  if (!t->options_.run_dir.empty() && program::detect_process_group().rank == 0) {
    auto run_directory = RunDirectory::acquire(t->options_.run_dir);
    if (!run_directory) return run_directory.error();
    t->run_directory_.emplace(std::move(*run_directory));
  }
  if (!t->options_.profile.empty())
    if (auto r = check_writable_file(t->options_.profile, "--profile"); !r) return r.error();
  if (auto r = t->load_data(); !r) return r.error();
  // The ranks join first: pipeline parallelism agrees on its stages through them.
  program::ProgramOptions program = program_options(t->options_);
  auto layout = program::parallel_layout(spec, program.group);
  if (!layout) return layout.error();
  auto ranks = RunRanks::connect(registry, device, program.group, *layout,
                                 {spec.train.comm, t->options_.comm_timeout_seconds, t->options_.rendezvous});
  if (!ranks) return ranks.error();
  t->ranks_.emplace(std::move(*ranks));
  if (layout->pipeline > 1)
    program.agree = [t = t.get()](std::vector<size_t>& cut) {
      return t->ranks_->all().broadcast(cut.data(), cut.size() * sizeof(size_t), 0);
    };
  auto built = program::Program::build(spec, device, registry, std::move(program));
  if (!built) return built.error();
  t->program_ = std::move(*built);
  t->memory_.emplace(spec, device, *t->program_, t->options_.memory_budgets);
  // The evaluation at each epoch's end has a graph of its own: a node of
  // it no device of the run can take fails now, not after an epoch.
  if (auto r = t->program_->check_evaluation(); !r) return r.error();
  exec::ExecutorOptions exec_options;
  exec_options.profile = !t->options_.profile.empty();
  exec_options.outputs = lowering::training_reads(t->model());
  exec_options.numerics = t->numerics_options();
  t->ranks_->give_to(exec_options, *t->program_);
  if (auto r = t->program_->allocate(exec_options); !r) return r.error();
  t->options_.prefetch = t->program_->options().prefetch;  // off when a re-plan left no room for it
  if (auto r = t->prepare_run(); !r) return r.error();
  return t;
}

exec::NumericsOptions Trainer::numerics_options() const {
  exec::NumericsOptions o{options_.check_numerics, true, options_.poison_outputs, options_.check_bounds};
  // Loss scaling lets gradients overflow and skips those steps by design.
  const auto amp = spec_.features.find("amp");
  if (o.check && amp != spec_.features.end()) {
    const auto scale = amp->second.find("loss_scale");
    const auto dtype = amp->second.find("dtype");
    const bool f16 = dtype != amp->second.end() && dtype->second == "f16";
    const bool scaling = scale != amp->second.end() ? scale->second != "none" : f16;
    if (scaling) {
      o.check_backward = false;
      log_info(
          "--check-numerics: backward nodes are not checked: [features.amp] loss scaling lets gradients "
          "overflow and skips those steps itself");
    }
  }
  return o;
}

Result<void> Trainer::load_data() {
  auto data = load_run_data(spec_);
  if (!data) return data.error();
  data_ = std::move(*data);
  if (data_.train.size() < spec_.train.batch_size)
    return make_error(data_.train.source + ": " + std::to_string(data_.train.size()) +
                          " training samples, fewer than one batch of " +
                          std::to_string(spec_.train.batch_size),
                      TDM_INVALID_ARGUMENT);
  return {};
}

// Device memory on a single-device executor whose backend exposes native
// streams: each bucket on a comm stream ordered by events
// (streamed_allreduce.hpp). Otherwise (host memory; a run composed of
// several devices, whose nodes run on several streams) on a thread,
// synchronising at bucket boundaries (overlapped_allreduce.hpp).
Result<void> Trainer::make_allreduce(std::vector<GradientBucket> buckets) {
  auto info = device_.info();
  if (!info) return info.error();
  const bool profile = !options_.profile.empty();
  exec::Executor& ex = executor();
  auto native = TANDEM_OPTIONAL_FN(device_.backend(), backend, tdm_backend_api, stream_native_handle, 1);
  if (!info->host_addressable && ex.compute_stream() != nullptr && native != nullptr) {
    const StreamedAllReduce::Device device{device_.backend().backend, device_.get(), ex.compute_stream(),
                                           native};
    auto parts = split_large_gradients(streamed_buckets(model().graph, ex, buckets), options_.bucket_bytes);
    // The packed buckets' buffer is part of the run's memory plan.
    const auto reserve = [&ex](size_t bytes) -> Result<void*> {
      auto buffer = ex.reserve_buffer(bytes, "the data-parallel gradient bucket buffer");
      if (!buffer)
        return make_error(buffer.error().message + "; lower --bucket-mb to shrink the buffer",
                          buffer.error().status);
      return buffer;
    };
    auto streamed = StreamedAllReduce::create(device, ranks_->data(), std::move(parts), reserve, profile);
    if (!streamed) return streamed.error();
    streamed_ = std::move(*streamed);
    return {};
  }
  allreduce_ = std::make_unique<OverlappedAllReduce>(ranks_->data(), ex, model().graph, std::move(buckets),
                                                     info->host_addressable, profile);
  return {};
}

// After allocation: what the loop needs, the initial weights, and a
// checkpoint's state when resuming.
Result<void> Trainer::prepare_run() {
  steps_ = std::make_unique<program::StepRunner>(*program_);
  if (!ranks_->alone()) steps_->set_ranks([this](int32_t v) { return ranks_->max(v); });
  steps_->set_run_directory(options_.run_dir, program_->group().rank == 0);
  checkpoints_.emplace(spec_, device_, registry_, *program_, options_.run_dir, options_.checkpoint_format,
                       ranks_->for_checkpoints());
  // Files a feature writes hold whole tensors, gathered as checkpoints are.
  if (!ranks_->alone())
    steps_->set_make_whole([this](checkpoint::Checkpoint& cp) { return checkpoints_->make_whole(cp); },
                           checkpoints_->gathers());
  // ZeRO stage 2 averages every gradient in its graph (zero.reduce_scatter).
  if (program_->data_world() > 1 && !program_->synced_gradients().empty()) {
    const Graph& graph = model().graph;
    std::vector<ValueId> gradients = program_->synced_gradients();
    if (!program_->layer_stages().empty())  // a pipeline stage averages its own layers' gradients
      std::erase_if(gradients, [this](ValueId g) { return executor().device_pointer(g) == nullptr; });
    auto buckets = plan_gradient_buckets(graph, gradients, model().optimizer_begin, options_.bucket_bytes);
    if (auto r = make_allreduce(std::move(buckets)); !r) return r;
  }
  profiler_ = std::make_unique<ProfileRecorder>(!options_.profile.empty());
  if (auto r = initialise_tensors(model(), executor(), spec_.train.seed, program_->data_rank()); !r) return r;
  if (options_.resume.empty() && options_.init_from.empty()) {
    if (spec_.lora.enabled && spec_.lora.base == "int8")
      return make_error(spec_.path +
                            ": [features.lora] base = \"int8\" quantizes the weights a run starts from: give "
                            "them with --init-from (a Hugging Face directory or a checkpoint)",
                        TDM_INVALID_ARGUMENT);
    return {};
  }
  const std::string& from = options_.resume.empty() ? options_.init_from : options_.resume;
  auto loaded = resume_from(from, options_.resume.empty());
  if (ranks_->alone()) return loaded;
  // Ranks read different files of a sharded checkpoint: one that fails must
  // not leave the others waiting in their first collective.
  auto failed = ranks_->max(loaded ? 0 : 1);
  if (!failed) return failed.error();
  if (!loaded || *failed == 0) return loaded;
  return make_error("another rank could not load " + from + " (its error says why)", TDM_INVALID_ARGUMENT);
}

Result<void> Trainer::resume_from(const std::string& path, bool weights_only) {
  std::string file = path;
  const bool hugging_face = hub::is_hf_model_dir(path);
  if (hugging_face && !weights_only)
    return make_error(path +
                          ": is a Hugging Face model directory, weights without a run to resume: start from "
                          "them with --init-from",
                      TDM_INVALID_ARGUMENT);
  if (std::filesystem::is_directory(path) && !is_sharded_checkpoint(path) && !hugging_face) {
    auto latest = latest_checkpoint(path);
    if (!latest) return make_error(path + ": no checkpoint in " + checkpoint_dir(path), TDM_NOT_FOUND);
    file = *latest;
  }
  auto cp = checkpoints_->load(file);
  if (!cp) return cp.error();
  if (!weights_only) {
    const auto hash = cp->metadata.find("tandem.model_hash");
    if (hash != cp->metadata.end() && hash->second != spec_.source_hash)
      return make_error(file + ": written for a different model file or --set overrides (hash " +
                            hash->second + ", now " + spec_.source_hash +
                            "); resume needs the same model, or use --init-from " +
                            "to start a new run from its weights",
                        TDM_INVALID_ARGUMENT);
    auto position = checkpoint_position(*cp, file);
    if (!position) return position.error();
    resumed_file_ = file;
    resumed_total_ = position->total_steps;
    start_step_ = position->step;
    start_epoch_ = position->epoch;
    start_batch_ = position->next_batch;
    if (position->world_size != program_->data_world()) continue_with_other_ranks(position->world_size);
  }
  return restore_tensors(model().graph, executor(), *cp, weights_only, file, model().lora_adapters);
}

// Another number of ranks: continue after the samples already seen this
// epoch (global batches change size, so the position is in samples).
void Trainer::continue_with_other_ranks(int64_t saved_world) {
  const int64_t micro_samples = program_->micro_batch_samples(), micro = program_->micro_batches();
  const int64_t seen = start_batch_ * micro_samples * saved_world;
  const int64_t global = micro_samples * program_->data_world() * micro;
  start_batch_ = seen / global * micro;
  // Steps count global batches, which changed size too.
  const int64_t steps_per_epoch = data_.train.size() / global;
  start_step_ = start_epoch_ * steps_per_epoch + start_batch_ / micro;
  log_info("resuming a run of " + std::to_string(saved_world) + " ranks with " +
           std::to_string(program_->data_world()) + ": continuing epoch " + std::to_string(start_epoch_ + 1) +
           " after " + std::to_string(seen) + " samples");
}

Result<std::string> Trainer::save(int64_t step, int64_t epoch, int64_t next_batch) {
  return checkpoints_->save(step, epoch, next_batch, total_steps_);
}

Result<void> Trainer::write_batch(const data::Batch& batch, bool staged, const data::Batch* next) {
  exec::Executor& ex = executor();
  const lowering::ModelGraph& m = model();
  if (staged) {  // its copy ran during the previous micro-batch
    if (auto r = ex.use_staged(); !r) return r;
  } else {
    if (auto r = ex.write(m.input, batch.input_data(), batch.input_bytes()); !r) return r;
    if (auto r = ex.write(m.labels, batch.labels.data(), batch.labels.size() * sizeof(int32_t)); !r) return r;
  }
  if (next == nullptr) return {};
  // Into the buffers this micro-batch does not read; copied while it runs.
  if (auto r = ex.stage(m.input, next->input_data(), next->input_bytes()); !r) return r;
  return ex.stage(m.labels, next->labels.data(), next->labels.size() * sizeof(int32_t));
}

Result<double> Trainer::micro_step(const data::Batch& batch, bool staged, const data::Batch* next,
                                   int64_t step, uint32_t micro, int64_t total_steps, int64_t& correct,
                                   bool read_loss) {
  if (auto r = write_batch(batch, staged, next); !r) return r.error();
  if (auto r = steps_->begin_micro_batch(step, micro, learning_rate(spec_.train, step, total_steps)); !r)
    return r.error();
  if (auto r = forward_backward(micro + 1 == program_->micro_batches()); !r) return r.error();
  if (auto r = steps_->end_micro_batch(step, micro); !r) return r.error();
  exec::Executor& ex = executor();
  const lowering::ModelGraph& m = model();
  const bool on_device = m.train_stats != kNoValue;
  if (on_device && !read_loss) return std::nan("");
  float loss = 0;
  if (auto r = ex.read(m.loss, &loss, sizeof loss); !r) return r.error();
  if (!std::isfinite(loss)) return diverged(loss, "at step " + std::to_string(step + 1));
  if (on_device) return static_cast<double>(loss);
  // One label per sample, or per token of a language model.
  const int64_t classes = m.graph.value(m.logits)->type.dims.back(), rows = int64_t(batch.labels.size());
  logits_.resize(static_cast<size_t>(rows * classes));
  if (auto r = ex.read(m.logits, logits_.data(), logits_.size() * sizeof(float)); !r) return r.error();
  correct += count_correct(logits_, batch.labels, rows, classes);
  return static_cast<double>(loss);
}

Result<void> Trainer::forward_backward(bool last_micro_batch) {
  exec::Executor& ex = executor();
  const size_t end = model().optimizer_begin;
  if (streamed_ && last_micro_batch) {
    // No host wait: the optimizer's run synchronises (and reports an
    // asynchronous error). With --profile every node is synchronised, so
    // backward has ended on the device when launching it returns, and
    // take_spans waits for the buckets' ends (without it, it waits for none).
    auto ran =
        streamed_->backward(end, [&ex](size_t first, size_t last) { return ex.launch_range(first, last); });
    const auto backward_done = Clock::now();
    for (const StreamedAllReduce::Span& s : streamed_->take_spans())
      profiler_->all_reduce(s.begin, s.end, s.bytes, backward_done);
    return ran;
  }
  if (!allreduce_ || !last_micro_batch) return ex.run(0, end);  // ranks average once per optimizer step
  size_t done = 0;
  Result<void> ran;
  const auto& buckets = allreduce_->buckets();
  for (size_t b = 0; b < buckets.size() && ran; ++b) {
    const size_t ready = std::min(buckets[b].ready_at, end);
    if (ready > done) ran = ex.run(done, ready);
    done = std::max(done, ready);
    if (ran) allreduce_->start(b);
  }
  if (ran) ran = ex.run(done, end);
  const auto backward_done = Clock::now();
  // Even after a failed launch: the started all-reduces use the gradients.
  auto reduced = allreduce_->finish();
  for (const OverlappedAllReduce::Span& s : allreduce_->take_spans())
    profiler_->all_reduce(s.begin, s.end, s.bytes, backward_done);
  if (!ran) return ran;
  return reduced;
}

}  // namespace tandem::host::train
