#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "data/loader.hpp"
#include "exec/tensor_text.hpp"
#include "lowering/autodiff.hpp"
#include "lowering/optimizer.hpp"
#include "ops/op_table.hpp"
#include "ops/shapes.hpp"
#include "place/placed_executor.hpp"
#include "train/checkpointing.hpp"
#include "train/device_select.hpp"
#include "train/evaluator.hpp"
#include "train/initializers.hpp"
#include "train/lr_schedule.hpp"
#include "train/profile_report.hpp"
#include "train/progress.hpp"
#include "util/format.hpp"
#include "util/logger.hpp"

namespace tandem::host::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string join_devices(const std::vector<std::string>& devices) {
  std::string text;
  for (const std::string& d : devices) text += (text.empty() ? "" : ", ") + d;
  return text;
}
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

Trainer::Trainer(const model::ModelSpec& spec, const DeviceHandle& device, const PluginRegistry& registry,
                 TrainOptions options)
    : spec_(spec), device_(device), registry_(registry), options_(std::move(options)) {}

Trainer::~Trainer() = default;

Result<std::unique_ptr<Trainer>> Trainer::create(const model::ModelSpec& spec, const DeviceHandle& device,
                                                 const PluginRegistry& registry, TrainOptions options) {
  std::unique_ptr<Trainer> t(new Trainer(spec, device, registry, std::move(options)));
  auto data = load_run_data(spec);
  if (!data) return data.error();
  t->data_ = std::move(*data);
  if (t->data_.train.size() < spec.train.batch_size)
    return make_error(t->data_.train.source + ": " + std::to_string(t->data_.train.size()) +
                          " training samples, fewer than one batch of " +
                          std::to_string(spec.train.batch_size),
                      TDM_INVALID_ARGUMENT);
  auto features = FeatureSet::create(registry, spec);
  if (!features) return features.error();
  t->features_ = std::move(*features);
  auto micro_size = t->features_->micro_batch_size();
  if (!micro_size) return micro_size.error();
  t->micro_batch_samples_ = spec.train.batch_size;
  if (*micro_size > 0) {
    if (spec.train.batch_size % *micro_size != 0)
      return make_error(
          spec.path + ": micro-batches of " + std::to_string(*micro_size) +
              " samples do not divide [train] batch_size = " + std::to_string(spec.train.batch_size) +
              "; choose a micro-batch size that divides it",
          TDM_INVALID_ARGUMENT);
    t->micro_batch_samples_ = *micro_size;
  }
  t->group_ = detect_process_group();
  // Layers marked `parallel` split over every rank of the run (tensor
  // parallelism); otherwise the ranks split the data (data parallelism).
  lowering::TensorParallel tp;
  if (lowering::uses_tensor_parallelism(spec) && t->group_.world > 1) {
    tp = {t->group_.rank, t->group_.world};
    // A backend older than the catalog's vocab_start would look up every
    // index in its slice as a row of its own: refuse rather than train wrong.
    const bool vocab = std::any_of(spec.layers.begin(), spec.layers.end(), [](const model::LayerSpec& l) {
      return l.op == "embedding" && l.string_attr("parallel", "none") == "vocab";
    });
    if (vocab && device.backend().abi_minor_effective < 3)
      return make_error("vocabulary-parallel embeddings need a backend built against SDK 1.3 or newer; " +
                            device.backend().name + " speaks ABI 1." +
                            std::to_string(device.backend().abi_minor_effective) + ": update the plugin",
                        TDM_UNSUPPORTED);
  } else {
    t->data_rank_ = t->group_.rank;
    t->data_world_ = t->group_.world;
  }
  auto model = lowering::build_forward(spec, t->micro_batch_samples_, lowering::Mode::Train, TDM_F32, tp);
  if (!model) return model.error();
  t->model_ = std::move(*model);
  Graph& graph = t->model_.graph;
  if (auto r = t->features_->run_passes(TDM_PASS_BEFORE_AUTODIFF, graph); !r) return r.error();
  if (auto r = lowering::append_backward(t->model_); !r) return r.error();
  if (auto r = t->features_->run_passes(TDM_PASS_AFTER_AUTODIFF, graph); !r) return r.error();
  if (auto r = lowering::append_optimizer(t->model_, spec.train); !r) return r.error();
  if (auto r = t->features_->run_passes(TDM_PASS_AFTER_OPTIMIZER, graph); !r) return r.error();
  auto micro = t->features_->micro_batches();
  if (!micro) return micro.error();
  t->micro_batches_ = *micro;
  if (t->micro_batch_samples_ * t->micro_batches_ != spec.train.batch_size && *micro_size > 0)
    return make_error("a feature splits each batch of " + std::to_string(spec.train.batch_size) +
                          " into micro-batches of " + std::to_string(t->micro_batch_samples_) +
                          " but asks for " + std::to_string(t->micro_batches_) +
                          " of them per step (internal: the plugin is inconsistent)",
                      TDM_INTERNAL);
  t->unplaced_ = graph;  // a re-plan after running out of memory starts again from here
  if (auto r = t->place(); !r) return r.error();
  // Passes and copies may have inserted nodes anywhere: find the optimizer phase again.
  t->locate_optimizer_phase();
  if (t->options_.plan_only) return t;  // `tandem plan`: nothing allocated
  exec::ExecutorOptions exec_options;
  exec_options.profile = !t->options_.profile.empty();
  exec_options.outputs = {"loss", t->model_.graph.value(t->model_.logits)->name};
  if (t->group_.world > 1) {
    auto comm = GradientCommunicator::create(registry, device, t->group_, t->options_.comm_timeout_seconds,
                                             t->options_.rendezvous);
    if (!comm) return comm.error();
    t->comm_ = std::move(*comm);
    if (tp.size > 1) {
      auto info = device.info();
      if (!info) return info.error();
      // Checkpoints gather the slices in host memory.
      if (!info->host_addressable)
        return make_error("tensor parallelism on " + device.id() +
                              " is not supported yet: it runs on CPU devices (--device cpu)",
                          TDM_UNSUPPORTED);
      exec_options.collectives = t->comm_.get();
    }
  }
  // Peaks count from here: calibration and planning allocated before.
  t->device_.allocator().reset_peak();
  for (const auto& [id, handle] : t->devices_) handle->allocator().reset_peak();
  auto executor = t->make_executor(t->model_.graph, t->placement_, exec_options);
  // A device that holds less than the plan assumed: place again within what it held.
  for (int attempt = 0; !executor && executor.error().status == TDM_OUT_OF_MEMORY && attempt < 3; ++attempt) {
    if (auto r = t->replan_after_oom(executor.error()); !r) return r.error();
    executor = t->make_executor(t->model_.graph, t->placement_, exec_options);
  }
  if (!executor) return executor.error();
  t->executor_ = std::move(*executor);
  if (t->options_.prefetch)  // second device buffers for the next batch, in the plan (estimate_inputs)
    for (ValueId v : {t->model_.input, t->model_.labels}) {
      auto r = t->executor_->allow_staging(v);
      if (!r && r.error().status != TDM_OUT_OF_MEMORY) return r.error();
      if (!r) {  // a device that ran out re-planned without room to spare: copy each batch in its step
        log_warning("no room for the next batch beside this one (" + r.error().message +
                    "): each batch is copied when its step starts (as with --no-prefetch)");
        t->options_.prefetch = false;
        break;
      }
    }
  t->scalars_ = std::make_unique<ExecutorScalars>(t->model_.graph, *t->executor_);
  t->shards_ = tensor_shards(t->model_);
  if (t->data_world_ > 1) {
    auto buckets = plan_gradient_buckets(graph, t->synced_gradients_, t->model_.optimizer_begin,
                                         t->options_.bucket_bytes);
    auto info = device.info();
    if (!info) return info.error();
    t->allreduce_ = std::make_unique<OverlappedAllReduce>(*t->comm_, *t->executor_, graph, std::move(buckets),
                                                          info->host_addressable, exec_options.profile);
  }
  t->profiler_ = std::make_unique<ProfileRecorder>(exec_options.profile);
  if (auto r = t->initialise(); !r) return r.error();
  if (!t->options_.resume.empty()) {
    if (auto r = t->resume_from(t->options_.resume, false); !r) return r.error();
  } else if (!t->options_.init_from.empty()) {
    if (auto r = t->resume_from(t->options_.init_from, true); !r) return r.error();
  }
  return t;
}

Result<std::string> Trainer::open_device(const std::string& name) {
  if (auto it = resolved_pins_.find(name); it != resolved_pins_.end()) return it->second;
  auto handle = select_device(registry_, name);
  if (!handle) return handle.error();
  const std::string id = handle->id();
  resolved_pins_[name] = id;
  if (devices_.count(id) == 0) {
    extra_devices_.push_back(std::make_unique<DeviceHandle>(std::move(*handle)));
    devices_[id] = extra_devices_.back().get();
  }
  return id;
}

Result<std::vector<std::string>> Trainer::candidate_devices() {
  devices_[device_.id()] = &device_;
  resolved_pins_[device_.id()] = device_.id();
  std::vector<std::string> ids = {device_.id()};
  std::vector<std::string> named = options_.devices;
  for (const auto& [id, budget] : options_.memory_budgets) named.push_back(id);
  for (const std::string& name : named) {
    auto id = open_device(name);
    if (!id) return make_error("--device " + name + ": " + id.error().message, id.error().status);
    if (std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  }
  return ids;
}

std::map<std::string, uint64_t> Trainer::capacities() const {
  std::map<std::string, uint64_t> out;
  for (const auto& [id, handle] : devices_) {
    if (auto b = options_.memory_budgets.find(id); b != options_.memory_budgets.end()) {
      out[id] = b->second;
    } else if (auto info = handle->info(); info && info->free_memory > 0) {
      out[id] = info->free_memory;
    }
    // What the device held when it ran out replaces what it reported free
    // (which the run's own cached blocks may have lowered meanwhile).
    if (auto measured = measured_capacity_.find(id); measured != measured_capacity_.end()) {
      auto budget = options_.memory_budgets.find(id);
      out[id] = budget != options_.memory_budgets.end() ? std::min(budget->second, measured->second)
                                                        : measured->second;
    }
  }
  return out;
}

place::FitContext Trainer::fit_context() const {
  place::FitContext c;
  c.spec = &spec_;
  c.micro_batch_samples = micro_batch_samples_;
  c.several_devices = devices_.size() > 1;
  for (const auto& [id, handle] : devices_)  // the optimizer's natural new home
    if (auto info = handle->info(); info && info->kind == TDM_DEVICE_CPU && c.offload_device.empty())
      c.offload_device = id;
  if (c.offload_device.empty())
    if (auto cpu = select_device(registry_, "cpu")) c.offload_device = cpu->id();
  return c;
}

place::EstimateInputs Trainer::estimate_inputs(place::CostModel* costs, place::WorkspaceCache* workspaces,
                                               bool capacity) const {
  place::EstimateInputs in;
  in.devices = devices_;
  in.devices[device_.id()] = &device_;
  in.default_device = device_.id();
  in.budgets = capacity ? capacities() : options_.memory_budgets;
  in.keep = {"loss", model_.graph.value(model_.logits)->name};
  if (options_.prefetch)
    in.staged = {model_.graph.value(model_.input)->name, model_.graph.value(model_.labels)->name};
  in.micro_batches = micro_batches_;
  in.costs = costs;
  in.workspaces = workspaces;
  return in;
}

place::CostModelOptions Trainer::cost_options() const {
  return {options_.cost_cache_dir, options_.cost_context, !options_.recalibrate};
}

std::map<std::string, std::string> Trainer::layer_devices() const {
  std::map<std::string, std::string> out;
  for (const model::LayerSpec& layer : spec_.layers) out[layer.name] = device_.id();
  const Graph& g = model_.graph;
  for (size_t i = g.node_count(); i-- > 0;)  // the first node of a layer decides
    if (const Node& n = *g.node_at(i); out.count(n.layer) > 0 && !n.device.empty()) out[n.layer] = n.device;
  return out;
}

Result<void> Trainer::replan_after_oom(const Error& oom) {
  std::string device;
  AllocationFailure failure;
  const auto check = [&](const std::string& id, const DeviceHandle& handle) {
    if (auto f = handle.allocator().take_failure()) {
      device = id;
      failure = *f;
    }
  };
  check(device_.id(), device_);
  for (const auto& [id, handle] : devices_) check(id, *handle);
  if (device.empty()) return oom;  // refused by a budget before allocating: the plan's own words
  measured_capacity_[device] = failure.held;
  const std::string what = device + " ran out of memory at run time: it held " + human_bytes(failure.held) +
                           " of this run when " + human_bytes(failure.requested) + " more were asked";
  const auto before = layer_devices();
  if (devices_.size() < 2 || placement_mode_ == "strict") {
    auto estimate = place::estimate_plan(model_.graph, placement_ ? &*placement_ : nullptr,
                                         estimate_inputs(nullptr, nullptr, true));
    const std::string advice =
        estimate && estimate->over() > 0 ? place::does_not_fit(*estimate, fit_context()) : oom.message;
    return make_error(
        what + (placement_mode_ == "strict" ? " (placement = \"strict\" moves no layer by itself)" : "") +
            ". " + advice,
        TDM_OUT_OF_MEMORY);
  }
  model_.graph = unplaced_;
  placement_.reset();
  automatic_.reset();
  force_automatic_ = true;
  if (auto r = place(); !r)
    return make_error(what + "; re-planning within that found no placement: " + r.error().message,
                      r.error().status);
  locate_optimizer_phase();
  std::string moves;
  for (const auto& [layer, to] : layer_devices())
    if (before.at(layer) != to) moves += (moves.empty() ? "" : ", ") + layer + " -> " + to;
  if (moves.empty())
    return make_error(what + "; re-planning within that moved no layer. " + oom.message, TDM_OUT_OF_MEMORY);
  log_warning(what + ". Re-planned within " + human_bytes(failure.held) + " on " + device + ": " + moves +
              " (tandem plan --memory-budget " + device + "=" + human_bytes(failure.held) +
              " shows the new plan; a budget avoids the retry)");
  return {};
}

Result<void> Trainer::place() {
  auto candidates = candidate_devices();
  if (!candidates) return candidates.error();
  const bool pinned = std::any_of(spec_.layers.begin(), spec_.layers.end(),
                                  [](const model::LayerSpec& l) { return l.device.has_value(); });
  const bool several = candidates->size() > 1;
  placement_mode_ = force_automatic_                 ? "auto"
                    : !spec_.train.placement.empty() ? spec_.train.placement
                    : several                        ? "auto"
                                                     : "pinned";
  const bool offload = !spec_.train.optimizer_device.empty();
  const bool automatic = placement_mode_ == "auto" && (several || pinned || offload);
  if (!pinned && !offload && !automatic) return {};
  place::PlacementOptions o;
  o.default_device = device_.id();
  o.strict = placement_mode_ == "strict";
  // A pin names a device as --device does; each device is opened once.
  o.resolve = [this](const std::string& pin) { return open_device(pin); };
  if (offload) {
    auto id = open_device(spec_.train.optimizer_device);
    if (!id)
      return make_error(spec_.path + ": [train] optimizer_device = \"" + spec_.train.optimizer_device +
                            "\": " + id.error().message,
                        id.error().status);
    if (*id == device_.id())
      log_info("[train] optimizer_device " + *id + " is the device the run trains on: nothing to offload");
    else
      o.optimizer_device = *id;
  }
  if (automatic) {
    // Pinned devices are devices of the run too: unpinned layers may join
    // them, and every device's costs are measured up front.
    for (const model::LayerSpec& layer : spec_.layers)
      if (layer.device)  // a bad pin is reported by placement, with its line
        if (auto id = open_device(*layer.device);
            id && std::find(candidates->begin(), candidates->end(), *id) == candidates->end())
          candidates->push_back(*id);
    place::CostModel costs(devices_, cost_options());
    place::WorkspaceCache workspaces;
    place::AutoPlacementInputs in{o, *candidates, estimate_inputs(&costs, &workspaces, true)};
    auto chosen = place::place_automatically(model_.graph, spec_, in);
    if (auto saved = costs.save(); !saved) log_warning(saved.error().message);
    if (!chosen) return chosen.error();
    if (costs.calibrated() > 0)
      log_info("calibrated " + std::to_string(costs.calibrated()) +
               " op costs for automatic placement (cached in " + costs.cache_file(device_.id()) +
               " and beside it)");
    if (!chosen->fits)
      return make_error(place::does_not_fit(chosen->estimate, fit_context()), TDM_OUT_OF_MEMORY);
    o.layer_devices = chosen->layer_devices;
    automatic_ = std::move(*chosen);
  }
  auto placement = place::place_layers(model_.graph, spec_, o);
  if (!placement) return placement.error();
  if (!placement->only_on(device_.id()) && group_.world > 1)
    return make_error(spec_.path + ": layers are placed on " + join_devices(placement->devices) +
                          ", not only on this rank's " + device_.id() + ", and this run has " +
                          std::to_string(group_.world) +
                          " ranks: placement across devices within a data- or tensor-parallel run is not "
                          "supported yet; run one device per process",
                      TDM_UNSUPPORTED);
  // Evaluation graphs find every parameter and state where training put it.
  const Graph& g = model_.graph;
  for (size_t i = 0; i < g.value_count(); ++i) {
    const Value& v = *g.value_at(i);
    if (v.kind == TDM_VALUE_PARAMETER || v.kind == TDM_VALUE_STATE)
      if (auto home = placement->home.find(v.id); home != placement->home.end())
        o.homes[v.name] = home->second;
  }
  placement_options_ = std::move(o);
  placement_ = std::move(*placement);
  return {};
}

Result<std::unique_ptr<exec::Executor>> Trainer::make_executor(
    const Graph& graph, const std::optional<place::Placement>& placement,
    exec::ExecutorOptions options) const {
  Result<std::unique_ptr<exec::Executor>> executor = make_error("", TDM_INTERNAL);
  if (placement && !placement->only_on(device_.id())) {
    executor = place::make_placed_executor(devices_, graph, *placement, options, options_.memory_budgets);
  } else {
    if (auto b = options_.memory_budgets.find(device_.id()); b != options_.memory_budgets.end())
      options.memory_budget = b->second;
    executor = exec::Executor::create(device_, graph, std::move(options));
  }
  if (!executor && executor.error().status == TDM_OUT_OF_MEMORY) {
    // Over a budget: the same words as the plan's, with the remedies.
    auto estimate = place::estimate_plan(graph, placement ? &*placement : nullptr,
                                         estimate_inputs(nullptr, nullptr, false));
    if (estimate && estimate->over() > 0)
      return make_error(place::does_not_fit(*estimate, fit_context()), TDM_OUT_OF_MEMORY);
  }
  return executor;
}

Result<void> Trainer::initialise() {
  const Graph& g = model_.graph;
  for (size_t i = 0; i < g.value_count(); ++i) {
    const Value& v = *g.value_at(i);
    if (v.kind != TDM_VALUE_PARAMETER && v.kind != TDM_VALUE_STATE) continue;
    auto init = model_.initializers.find(v.id);
    if (init == model_.initializers.end()) {
      if (auto r = executor_->fill(v.id, v.initial_value.value_or(0.0)); !r) return r;
      continue;
    }
    auto shard = model_.shards.find(v.id);
    if (shard == model_.shards.end()) {
      const auto values = initial_values(init->second, v.name, ops::numel(v.type.dims), spec_.train.seed);
      if (auto r = executor_->write(v.id, values.data(), values.size() * sizeof(float)); !r) return r;
      continue;
    }
    // This rank's slice of the values the whole tensor would start with.
    const auto values =
        initial_values(init->second, v.name, ops::numel(shard->second.full), spec_.train.seed);
    std::vector<std::byte> whole(values.size() * sizeof(float));
    std::memcpy(whole.data(), values.data(), whole.size());
    const auto slice = slice_of(whole, shard->second, model_.tensor_parallel.rank,
                                model_.tensor_parallel.size, sizeof(float));
    if (auto r = executor_->write(v.id, slice.data(), slice.size()); !r) return r;
  }
  return {};
}

Result<void> Trainer::resume_from(const std::string& path, bool weights_only) {
  std::string file = path;
  if (std::filesystem::is_directory(path)) {
    auto latest = latest_checkpoint(path);
    if (!latest) return make_error(path + ": no checkpoint in " + checkpoint_dir(path), TDM_NOT_FOUND);
    file = *latest;
  }
  auto cp = checkpoint::read_safetensors(file);
  if (!cp) return cp.error();
  if (auto r = slice_checkpoint(*cp, shards_, model_.tensor_parallel.rank, model_.tensor_parallel.size, file);
      !r)
    return r;
  if (!weights_only) {
    const auto hash = cp->metadata.find("tandem.model_hash");
    if (hash != cp->metadata.end() && hash->second != spec_.source_hash)
      return make_error(file + ": written for a different model file or --set overrides (hash " +
                            hash->second + ", now " + spec_.source_hash +
                            "); resume needs the same model, or use --init-from " +
                            "to start a new run from its weights",
                        TDM_INVALID_ARGUMENT);
    const auto get = [&](const char* key) {
      auto it = cp->metadata.find(key);
      return it == cp->metadata.end() ? int64_t{0} : std::stoll(it->second);
    };
    start_step_ = get("tandem.step");
    start_epoch_ = get("tandem.epoch");
    start_batch_ = get("tandem.next_batch");
    // Another number of ranks: continue after the samples already seen this
    // epoch (global batches change size, so the position is in samples).
    const int64_t saved_world = std::max<int64_t>(1, get("tandem.world_size"));
    if (saved_world != data_world_) {
      const int64_t seen = start_batch_ * micro_batch_samples_ * saved_world;
      const int64_t global = micro_batch_samples_ * data_world_ * micro_batches_;
      start_batch_ = seen / global * micro_batches_;
      // Steps count global batches, which changed size too.
      const int64_t steps_per_epoch = data_.train.size() / global;
      start_step_ = start_epoch_ * steps_per_epoch + start_batch_ / micro_batches_;
      log_info("resuming a run of " + std::to_string(saved_world) + " ranks with " +
               std::to_string(data_world_) + ": continuing epoch " + std::to_string(start_epoch_ + 1) +
               " after " + std::to_string(seen) + " samples");
    }
  }
  return restore_tensors(model_.graph, *executor_, *cp, weights_only, file);
}

std::map<std::string, std::string> Trainer::metadata(int64_t step, int64_t epoch, int64_t next_batch) const {
  std::string plugins;
  for (const LoadedPlugin* p : registry_.plugins())
    plugins += (plugins.empty() ? "" : ",") + p->name + "=" + p->version;
  return {{"format", "pt"},  // what safetensors tools expect for a state dict
          {"tandem.model_file", spec_.path},
          {"tandem.model_hash", spec_.source_hash},
          {"tandem.step", std::to_string(step)},
          {"tandem.epoch", std::to_string(epoch)},
          {"tandem.next_batch", std::to_string(next_batch)},
          {"tandem.seed", std::to_string(spec_.train.seed)},
          {"tandem.device", device_.id()},
          {"tandem.plugins", plugins},
          {"tandem.world_size", std::to_string(data_world_)}};
}

Result<std::string> Trainer::save(int64_t step, int64_t epoch, int64_t next_batch) {
  // Rank 0 writes for everyone: data-parallel ranks hold identical weights,
  // tensor-parallel ones first gather their slices into whole tensors.
  if (group_.rank != 0 && shards_.empty()) return std::string();
  auto cp = collect_tensors(model_.graph, *executor_, metadata(step, epoch, next_batch));
  if (!cp) return cp.error();
  const int ranks = model_.tensor_parallel.size;
  for (checkpoint::TensorRecord& t : cp->tensors) {
    auto shard = shards_.find(t.name);
    if (shard == shards_.end()) continue;
    const size_t element = exec::dtype_size(t.dtype);
    std::vector<std::byte> slices(t.data.size() * static_cast<size_t>(ranks));
    if (auto r = comm_->all_gather(t.data.data(), slices.data(), t.data.size() / element, t.dtype, nullptr);
        !r)
      return r.error();
    t.data = assemble(slices, shard->second, ranks, element);
    t.shape = shard->second.full;
  }
  if (group_.rank != 0) return std::string();
  return save_checkpoint(options_.run_dir, step, *cp, spec_.train.keep_checkpoints);
}

Result<double> Trainer::micro_step(const data::Batch& batch, bool staged, const data::Batch* next,
                                   int64_t step, uint32_t micro, int64_t total_steps, int64_t& correct) {
  exec::Executor& ex = *executor_;
  const Graph& g = model_.graph;
  if (staged) {  // its copy ran during the previous micro-batch
    if (auto r = ex.use_staged(); !r) return r.error();
  } else {
    if (auto r = ex.write(model_.input, batch.features.data(), batch.features.size() * sizeof(float)); !r)
      return r.error();
    if (auto r = ex.write(model_.labels, batch.labels.data(), batch.labels.size() * sizeof(int32_t)); !r)
      return r.error();
  }
  if (next != nullptr) {  // into the buffers this micro-batch does not read; copied while it runs
    if (auto r = ex.stage(model_.input, next->features.data(), next->features.size() * sizeof(float)); !r)
      return r.error();
    if (auto r = ex.stage(model_.labels, next->labels.data(), next->labels.size() * sizeof(int32_t)); !r)
      return r.error();
  }
  if (model_.dropout_step != kNoValue) {
    // Every micro-batch and every rank draws its own masks.
    const int64_t offset = (step * micro_batches_ + micro) * data_world_ + data_rank_;
    if (auto r = ex.write(model_.dropout_step, &offset, sizeof offset); !r) return r.error();
  }
  const tdm_step_info info{sizeof(tdm_step_info), step, micro, micro_batches_, scalars_->as_c()};
  if (micro == 0) {
    const auto lr = static_cast<float>(learning_rate(spec_.train, step, total_steps));
    if (auto r = ex.write(model_.lr, &lr, sizeof lr); !r) return r.error();
    if (model_.step != kNoValue) {
      const auto t = static_cast<int32_t>(step + 1);
      if (auto r = ex.write(model_.step, &t, sizeof t); !r) return r.error();
    }
    if (auto r = features_->step_begin(info); !r) return r.error();
  }
  if (auto r = forward_backward(micro + 1 == micro_batches_); !r) return r.error();
  if (auto r = features_->micro_batch_end(info); !r) return r.error();
  float loss = 0;
  if (auto r = ex.read(model_.loss, &loss, sizeof loss); !r) return r.error();
  if (!std::isfinite(loss))
    return make_error("the loss became " + std::to_string(loss) + " at step " + std::to_string(step + 1) +
                          ": training diverged; lower [train] lr, add clip_grad_norm, or check the data",
                      TDM_ABORTED);
  const int64_t classes = g.value(model_.logits)->type.dims[1];
  logits_.resize(static_cast<size_t>(batch.size * classes));
  if (auto r = ex.read(model_.logits, logits_.data(), logits_.size() * sizeof(float)); !r) return r.error();
  correct += count_correct(logits_, batch.labels, batch.size, classes);
  return static_cast<double>(loss);
}

Result<void> Trainer::forward_backward(bool last_micro_batch) {
  exec::Executor& ex = *executor_;
  const size_t end = model_.optimizer_begin;
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
  const auto backward_done = std::chrono::steady_clock::now();
  // Even after a failed launch: the started all-reduces use the gradients.
  auto reduced = allreduce_->finish();
  for (const OverlappedAllReduce::Span& s : allreduce_->take_spans())
    profiler_->all_reduce(s.begin, s.end, s.bytes, backward_done);
  if (!ran) return ran;
  return reduced;
}

void Trainer::locate_optimizer_phase() {
  const Graph& g = model_.graph;
  run_on_skip_.clear();
  synced_gradients_.clear();
  model_.optimizer_begin = g.node_count();
  clip_point_ = g.node_count();
  for (size_t i = g.node_count(); i-- > 0;) {
    const Node& n = *g.node_at(i);
    if (n.phase == TDM_PHASE_OPTIMIZER) model_.optimizer_begin = i;
    if (n.phase == TDM_PHASE_OPTIMIZER && n.annotations.count("tandem.run_on_skip") > 0)
      run_on_skip_.insert(run_on_skip_.begin(), i);
    if (model_.clip_coef != kNoValue &&
        std::find(n.inputs.begin(), n.inputs.end(), model_.clip_coef) != n.inputs.end())
      clip_point_ = i;
  }
  // The gradient each update reads, before clipping scales it: after a pass
  // such as grad_accum this is the accumulated sum, not the autodiff value.
  for (size_t i = model_.optimizer_begin; i < g.node_count(); ++i) {
    const Node& n = *g.node_at(i);
    const ops::OpInfo* info = ops::find(n.op);
    if (info == nullptr || !info->is(ops::kOptimizer)) continue;
    ValueId grad = n.inputs[size_t(info->gradient_input)];
    const Node* producer = g.node(g.value(grad)->producer);
    if (producer != nullptr && model_.clip_coef != kNoValue && producer->inputs.size() == 2 &&
        producer->inputs[1] == model_.clip_coef)
      grad = producer->inputs[0];
    synced_gradients_.push_back(grad);
  }
}

Result<void> Trainer::optimizer_step(int64_t step) {
  exec::Executor& ex = *executor_;
  const tdm_step_info info{sizeof(tdm_step_info), step, micro_batches_ - 1, micro_batches_, scalars_->as_c()};
  if (auto r = features_->gradients_ready(info); !r) return r;
  auto skip = features_->before_optimizer_step(info);
  if (!skip) return skip.error();
  if (*skip) {  // only what must run anyway (e.g. clearing accumulators)
    for (size_t i : run_on_skip_)
      if (auto r = ex.run(i, i + 1); !r) return r;
    return features_->step_end(info);
  }
  if (model_.clip_coef != kNoValue) {
    if (auto r = ex.run(model_.optimizer_begin, clip_point_); !r) return r;
    float norm_sq = 0;  // read before any later optimizer node can reuse its bytes
    if (auto r = ex.read(model_.grad_norm_sq, &norm_sq, sizeof norm_sq); !r) return r;
    const float norm = std::sqrt(norm_sq);
    const auto coef = static_cast<float>(std::min(1.0, spec_.train.clip_grad_norm / (norm + 1e-6)));
    if (auto r = ex.write(model_.clip_coef, &coef, sizeof coef); !r) return r;
    if (auto r = ex.run(clip_point_, ex.node_count()); !r) return r;
  } else if (auto r = ex.run(model_.optimizer_begin, ex.node_count()); !r) {
    return r;
  }
  return features_->step_end(info);
}

namespace {

// `training_peak`: what the device's allocator held at most during the
// training steps, before any evaluation executor existed (0: not measured).
void print_plan(const DeviceHandle& device, const exec::Executor& ex, uint64_t budget,
                uint64_t training_peak) {
  const exec::MemoryEstimate& e = ex.plan().estimate;
  const AllocatorStats stats = device.allocator().stats();
  const auto share = [&](uint64_t measured) {
    if (e.total == 0) return std::string();
    char text[48];
    std::snprintf(text, sizeof text, " (%+.1f%% of the plan)",
                  100.0 * (static_cast<double>(measured) - static_cast<double>(e.total)) /
                      static_cast<double>(e.total));
    return std::string(text);
  };
  std::cout << "memory on " << device.id() << " (planned before the first step):\n"
            << "  parameters       " << human_bytes(e.parameters) << "\n"
            << "  gradients        " << human_bytes(e.gradients) << "\n"
            << "  optimizer state  " << human_bytes(e.optimizer_state) << "\n"
            << "  other state      " << human_bytes(e.other_state) << "\n"
            << "  inputs           " << human_bytes(e.inputs) << "\n"
            << "  activations      " << human_bytes(e.activations) << " (reused by liveness; "
            << human_bytes(ex.plan().activations_unshared) << " without reuse)\n"
            << "  workspace        " << human_bytes(e.workspace) << "\n"
            << "  block rounding   " << human_bytes(e.allocator_rounding) << "\n"
            << "  planned total    " << human_bytes(e.total)
            << (budget > 0 ? " of a budget of " + human_bytes(budget) : std::string()) << "\n";
  if (training_peak > 0)
    std::cout << "  measured peak    " << human_bytes(training_peak) << share(training_peak)
              << " during the training steps\n";
  std::cout << "  measured peak    " << human_bytes(stats.peak)
            << " with evaluation (its executors share the "
            << "parameters, not the activations)\n"
            << "  allocator        " << stats.allocations << " allocations, " << human_bytes(stats.reserved)
            << " reserved, " << stats.cached_blocks << " cached blocks, fragmentation "
            << static_cast<int>(stats.fragmentation * 100) << "%\n";
}

}  // namespace

void Trainer::note_training_peaks() {
  if (devices_.empty()) training_peaks_[device_.id()] = device_.allocator().stats().peak;
  for (const auto& [id, device] : devices_) training_peaks_[id] = device->allocator().stats().peak;
}

void Trainer::record_memory(Progress& progress) const {
  const auto record = [&](const DeviceHandle& device, const exec::Executor& ex) {
    const auto peak = training_peaks_.find(device.id());
    progress.memory(device.id(), ex.plan().estimate.total, peak == training_peaks_.end() ? 0 : peak->second,
                    device.allocator().stats().peak);
  };
  if (executor_->parts().empty()) return record(device_, *executor_);
  for (const exec::ExecutorPart& part : executor_->parts()) record(*devices_.at(part.device), *part.executor);
}

void Trainer::report_memory(int64_t steps) const {
  const auto budget = [&](const std::string& id) {
    auto it = options_.memory_budgets.find(id);
    return it == options_.memory_budgets.end() ? uint64_t{0} : it->second;
  };
  const auto peak = [&](const std::string& id) {
    auto it = training_peaks_.find(id);
    return it == training_peaks_.end() ? uint64_t{0} : it->second;
  };
  if (executor_->parts().empty()) {
    print_plan(device_, *executor_, budget(device_.id()), peak(device_.id()));
    return;
  }
  for (const exec::ExecutorPart& part : executor_->parts())
    print_plan(*devices_.at(part.device), *part.executor, budget(part.device), peak(part.device));
  std::cout << "copies between devices per step: " << placement_->copies.size() << " planned ("
            << human_bytes(placement_->copy_bytes()) << "), "
            << (steps > 0 ? executor_->transfers_run() / static_cast<uint64_t>(steps) : 0) << " run ("
            << human_bytes(steps > 0 ? executor_->transferred_bytes() / static_cast<uint64_t>(steps) : 0)
            << ", evaluation included)\n";
  for (const place::Copy& c : placement_->copies)
    std::cout << "  " << c.value << " " << human_bytes(c.bytes) << " " << c.from << " -> " << c.to
              << " (layer '" << c.producer_layer << "' -> '" << c.consumer_layer << "')\n";
  if (steps > 0 && executor_->transfer_busy_us() > 0) {
    // Evaluation's copies are not in it: the evaluator has executors of its own.
    std::ostringstream line;
    line << std::fixed << std::setprecision(3)
         << "copy time per step: " << executor_->transfer_busy_us() / 1000.0 / static_cast<double>(steps)
         << " ms, " << std::setprecision(0) << 100.0 * executor_->hidden_transfer_fraction()
         << "% hidden behind compute\n";
    std::cout << line.str();
  }
}

Result<TrainResult> Trainer::run() {
  const int64_t batch = micro_batch_samples_;  // one loader batch: a micro-batch
  data::DataLoader loader(data_.train, {.batch_size = batch,
                                        .shuffle = true,
                                        .drop_last = true,
                                        .augment = true,
                                        .seed = spec_.train.seed,
                                        .threads = options_.loader_threads,
                                        .prefetch = static_cast<int>(spec_.data.prefetch),
                                        .transforms = data_.transforms,
                                        .shard_rank = data_rank_,
                                        .shard_count = data_world_});
  const int64_t per_epoch = loader.batches_per_epoch();
  const int64_t steps_per_epoch = per_epoch / micro_batches_;
  if (steps_per_epoch == 0)
    return make_error(data_.train.source + ": one epoch has " + std::to_string(per_epoch) +
                          " batches, fewer than the " + std::to_string(micro_batches_) +
                          " micro-batches of one accumulated step",
                      TDM_INVALID_ARGUMENT);
  const int64_t total = spec_.train.steps > 0 ? spec_.train.steps : spec_.train.epochs * steps_per_epoch;
  const int64_t epochs = (total + steps_per_epoch - 1) / steps_per_epoch;
  std::filesystem::create_directories(options_.run_dir);
  const bool leader = group_.rank == 0;  // only rank 0 reports
  Progress progress(options_.live_progress, spec_.train.log_every,
                    leader ? (std::filesystem::path(options_.run_dir) / "metrics.jsonl").string() : "",
                    !leader);
  std::map<std::string, void*> shared;
  for (size_t i = 0; i < model_.graph.value_count(); ++i) {
    const Value& v = *model_.graph.value_at(i);
    if (v.kind == TDM_VALUE_PARAMETER || v.kind == TDM_VALUE_STATE)
      shared[v.name] = executor_->device_pointer(v.id);
  }
  Evaluator evaluator(spec_, device_, shared);
  if (placement_ && !placement_->only_on(device_.id())) evaluator.use_placement(placement_options_, devices_);
  if (model_.tensor_parallel.size > 1) evaluator.use_tensor_parallelism(model_.tensor_parallel, comm_.get());
  ProfileRecorder& profiler = *profiler_;

  TrainResult result;
  const auto run_start = Clock::now();
  int64_t step = start_step_, epoch = start_epoch_, first_batch = start_batch_;
  while (step < total) {
    loader.start_epoch(static_cast<uint64_t>(epoch), first_batch);
    loader.reset_wait();
    const auto epoch_start = Clock::now();
    double loss_sum = 0;
    int64_t seen = 0, correct = 0, index = first_batch;
    StepReport report{.epoch = epoch + 1, .epochs = epochs, .batches = per_epoch, .total_steps = total};
    std::shared_ptr<const data::Batch> ahead;  // staged; never carried across epochs
    const auto next_batch = [&] {
      const auto wait_start = Clock::now();
      auto b = loader.next();
      profiler.data_wait(wait_start, Clock::now());
      return b;
    };
    // One optimizer step takes `micro_batches_` batches; an epoch ends when
    // fewer than that remain, so no step ever straddles two epochs.
    while (step < total && index + micro_batches_ <= per_epoch) {
      double step_loss = 0;
      for (uint32_t micro = 0; micro < micro_batches_; ++micro) {
        const bool staged = ahead != nullptr;
        std::shared_ptr<const data::Batch> b = std::move(ahead);
        if (!b) {
          b = next_batch();
          if (!b) return make_error("the data loader ended an epoch early (internal)", TDM_INTERNAL);
        }
        // One batch of lookahead, within the epoch: the next micro-batch is
        // staged while this one runs, if it will run in this epoch.
        const bool another =
            micro + 1 < micro_batches_ || (step + 1 < total && index + 1 + micro_batches_ <= per_epoch);
        if (options_.prefetch && another) {
          ahead = next_batch();
          if (!ahead) return make_error("the data loader ended an epoch early (internal)", TDM_INTERNAL);
        }
        auto loss = micro_step(*b, staged, ahead.get(), step, micro, total, correct);
        if (!loss) return loss.error();
        ++index;
        seen += b->size;
        loss_sum += *loss * static_cast<double>(b->size);
        step_loss += *loss / micro_batches_;
      }
      if (auto r = optimizer_step(step); !r) return r.error();
      ++step;
      const double elapsed = seconds_since(epoch_start);
      report.batch = index;
      report.step = step;
      report.loss = loss_sum / static_cast<double>(seen);
      report.accuracy = static_cast<double>(correct) / static_cast<double>(seen);
      report.lr = learning_rate(spec_.train, step - 1, total);
      report.samples_per_second = static_cast<double>(seen) / elapsed;
      report.data_wait_fraction = loader.wait_seconds() / elapsed;
      report.eta_seconds =
          elapsed / static_cast<double>(seen) * static_cast<double>((total - step) * batch * micro_batches_);
      progress.step(report);
      if (options_.status_request != nullptr && options_.status_request->exchange(false))
        progress.status(report);
      result.last_loss = step_loss;
      int32_t stop = options_.stop != nullptr && options_.stop->load() ? 1 : 0;
      if (comm_) {  // every rank stops after the same step, or the collectives would mismatch
        auto agreed = comm_->max(stop);
        if (!agreed) return agreed.error();
        stop = *agreed;
      }
      if (stop != 0) {
        auto saved = save(step, epoch, index);
        if (!saved) return saved.error();
        progress.line("interrupted: checkpoint saved to " + *saved + "; continue with: tandem train " +
                      spec_.path + " --resume " + options_.run_dir);
        result.interrupted = true;
        result.last_checkpoint = *saved;
        result.steps = step;
        return result;
      }
    }
    const bool epoch_done = index + micro_batches_ > per_epoch;
    double val_loss = -1, val_acc = -1;
    const data::Dataset* eval_set = data_.validation ? &*data_.validation
                                    : data_.test     ? &*data_.test
                                                     : nullptr;
    if (training_peaks_.empty()) note_training_peaks();
    if (eval_set != nullptr && (epoch_done || step >= total)) {
      auto ev = evaluator.evaluate(*eval_set, data_.transforms, options_.loader_threads);
      if (!ev) return ev.error();
      val_loss = ev->loss;
      val_acc = ev->accuracy;
      (data_.validation ? result.validation_accuracy : result.test_accuracy) = ev->accuracy;
    }
    progress.epoch(report, val_loss, val_acc, seconds_since(epoch_start));
    result.samples_per_second = report.samples_per_second;
    if (epoch_done) {
      ++epoch;
      first_batch = 0;
    } else {
      first_batch = index;
    }
    auto saved = save(step, epoch, first_batch);
    if (!saved) return saved.error();
    result.last_checkpoint = *saved;
  }
  if (data_.validation && data_.test) {
    auto ev = evaluator.evaluate(*data_.test, data_.transforms, options_.loader_threads);
    if (!ev) return ev.error();
    result.test_accuracy = ev->accuracy;
  }
  result.steps = step;
  result.seconds = seconds_since(run_start);
  record_memory(progress);
  if (options_.memory_report && leader) report_memory(step - start_step_);
  if (!options_.profile.empty() && leader) {
    if (auto r = profiler.write(options_.profile, model_.graph, *executor_, device_.id()); !r)
      return r.error();
    profiler.print_summary(std::cout, model_.graph, *executor_);
  }
  return result;
}

}  // namespace tandem::host::train
