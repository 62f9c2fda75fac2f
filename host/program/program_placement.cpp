// Program: where every node runs (over the devices of RunDevices), and
// running out of memory at run time (re-planning).
#include <algorithm>

#include "place/placed_executor.hpp"
#include "program/program.hpp"
#include "util/format.hpp"
#include "util/logger.hpp"

namespace tandem::host::program {
namespace {

std::string join_devices(const std::vector<std::string>& devices) {
  std::string text;
  for (const std::string& d : devices) text += (text.empty() ? "" : ", ") + d;
  return text;
}

}  // namespace

place::FitContext Program::fit_context(bool whole_memory) const {
  place::FitContext c;
  c.spec = &spec_;
  c.micro_batch_samples = micro_batch_samples_;
  c.several_devices = devices_.count() > 1;
  c.limit_kind = devices_.limit_kinds(whole_memory);
  c.offload_device = devices_.offload_device();  // the optimizer's natural new home
  c.streamed_total = streamed_total();
  return c;
}

place::EstimateInputs Program::estimate_inputs(place::CostModel* costs, place::WorkspaceCache* workspaces,
                                               bool capacity) const {
  place::EstimateInputs in;
  in.devices = devices_.by_id();
  in.default_device = device_.id();
  in.budgets = capacity ? devices_.capacities() : options_.memory_budgets;
  const std::vector<std::string> reads = lowering::training_reads(model_);
  in.keep = {reads.begin(), reads.end()};
  if (options_.prefetch)
    in.staged = {model_.graph.value(model_.input)->name, model_.graph.value(model_.labels)->name};
  in.micro_batches = micro_batches_;
  in.streamed = streamed_;
  in.stream_depth = options_.stream_depth;
  in.zero_world = model_.zero.world;
  in.pipelined = pipeline_wanted();
  if (stages_) {  // each stage a "device": this rank's, as every rank's is
    in.devices.clear();
    in.default_device = stages_->devices.front();
    const auto budget = in.budgets.find(device_.id());
    for (const std::string& stage : stages_->devices) {
      in.devices[stage] = &device_;
      if (budget != in.budgets.end()) in.budgets[stage] = budget->second;
    }
  }
  in.costs = costs;
  in.workspaces = workspaces;
  return in;
}

place::CostModelOptions Program::cost_options() const {
  return {options_.cost_cache_dir, options_.cost_context, !options_.recalibrate};
}

std::map<std::string, std::string> Program::layer_devices() const {
  std::map<std::string, std::string> out;
  for (const model::LayerSpec& layer : spec_.layers) out[layer.name] = device_.id();
  const Graph& g = model_.graph;
  for (size_t i = g.node_count(); i-- > 0;)  // the first node of a layer decides
    if (const Node& n = *g.node_at(i); out.count(n.layer) > 0 && !n.device.empty()) out[n.layer] = n.device;
  return out;
}

Result<void> Program::replan_after_oom(const Error& oom) {
  std::string device;
  AllocationFailure failure;
  const auto check = [&](const std::string& id, const DeviceHandle& handle) {
    if (auto f = handle.allocator().take_failure()) {
      device = id;
      failure = *f;
    }
  };
  for (const auto& [id, handle] : devices_.by_id()) check(id, *handle);
  if (device.empty()) return oom;  // refused by a budget before allocating: the plan's own words
  // Holding nothing of this run, it had less than the first allocation
  // free: that is its capacity (0 would read as no limit at all).
  uint64_t capacity = failure.held;
  if (capacity == 0)
    if (auto info = devices_.by_id().at(device)->info(); info)
      capacity = std::max<uint64_t>(info->free_memory, 1);
  devices_.ran_out(device, std::max<uint64_t>(capacity, 1));
  const std::string what = device + " ran out of memory at run time: it held " + human_bytes(failure.held) +
                           " of this run when " + human_bytes(failure.requested) + " more were asked";
  const auto before = layer_devices();
  const std::set<std::string> streamed_before = streamed_;
  if (devices_.count() < 2 && placement_mode_ != "strict") {  // move memory: stream what makes it fit
    auto fit = fewest_streamed(estimate_inputs(nullptr, nullptr, true));
    if (!fit) return fit.error();
    if (*fit) {
      adopt(**fit, what + "; re-planned within that");
      return {};
    }
  }
  if (devices_.count() < 2 || placement_mode_ == "strict") {
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
  if (moves.empty() && streamed_ != streamed_before) return {};  // streams instead, and said so
  if (moves.empty())
    return make_error(what + "; re-planning within that moved no layer. " + oom.message, TDM_OUT_OF_MEMORY);
  log_warning(what + ". Re-planned within " + human_bytes(capacity) + " on " + device + ": " + moves +
              " (tandem plan --memory-budget " + device + "=" + human_bytes(capacity) +
              " shows the new plan; a budget avoids the retry)");
  return {};
}

Result<void> Program::place() {
  if (layout_.pipeline > 1) return place_stages();
  if (options_.placement) {  // an evaluation placed as its training run
    auto candidates = candidate_devices();
    if (!candidates) return candidates.error();
    auto placement = place::place_layers(model_.graph, spec_, *options_.placement);
    if (!placement) return placement.error();
    placement_options_ = *options_.placement;
    if (!placement->only_on(device_.id())) placement_ = std::move(*placement);
    return {};
  }
  auto candidates = candidate_devices();
  if (!candidates) return candidates.error();
  place::PlacementOptions o;
  auto wanted = placement_wanted(*candidates, o);
  if (!wanted) return wanted.error();
  if (!*wanted) return {};
  auto placement = place::place_layers(model_.graph, spec_, o);
  if (options_.group.world > 1)  // what ranks cannot do yet comes first
    if (auto r = check_placement_with_ranks(placement, o); !r) return r;
  if (!placement) return placement.error();
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

// A run of several ranks computes on one device per rank; only the
// optimizer's updates ([train] optimizer_device) may run beside it.
Result<void> Program::check_placement_with_ranks(const Result<place::Placement>& placement,
                                                 const place::PlacementOptions& o) const {
  const std::string ranks = "this run has " + std::to_string(options_.group.world) + " ranks";
  const std::string what =
      ": placement across devices within a data- or tensor-parallel run is not supported yet; run one "
      "device per process (an optimizer_device beside it is supported)";
  if (!placement)
    return make_error(spec_.path + ": " + ranks + " and places layers beyond this rank's " + device_.id() +
                          what + " (placing them said: " + placement.error().message + ")",
                      TDM_UNSUPPORTED);
  const Graph& g = model_.graph;
  for (size_t i = 0; i < g.node_count(); ++i) {
    const Node& n = *g.node_at(i);
    const bool beside =
        n.device == o.optimizer_device && (ops::is(n.op, ops::kOptimizer) || n.op == ops::kDeviceCopy);
    if (n.device != device_.id() && !beside)
      return make_error(spec_.path + ": " + (n.layer.empty() ? "node '" + n.name : "layer '" + n.layer) +
                            "' runs on " + n.device + ", not on this rank's " + device_.id() + ", and " +
                            ranks + what,
                        TDM_UNSUPPORTED);
  }
  return {};
}

// Whether anything is placed (pins, optimizer offload, several devices),
// and the options to place with.
Result<bool> Program::placement_wanted(std::vector<std::string>& candidates, place::PlacementOptions& o) {
  const bool pinned = std::any_of(spec_.layers.begin(), spec_.layers.end(),
                                  [](const model::LayerSpec& l) { return l.device.has_value(); });
  const bool several = candidates.size() > 1;
  placement_mode_ = force_automatic_                 ? "auto"
                    : !spec_.train.placement.empty() ? spec_.train.placement
                    : several                        ? "auto"
                                                     : "pinned";
  const bool train = options_.mode == lowering::Mode::Train;
  const bool offload = train && !spec_.train.optimizer_device.empty();
  const bool automatic = placement_mode_ == "auto" && (several || pinned || offload);
  if (!pinned && !offload && !automatic) return false;
  o.default_device = device_.id();
  o.strict = placement_mode_ == "strict";
  o.averaged_gradients = train && layout_.data > 1;
  // A pin names a device as --device does; each device is opened once.
  o.resolve = [this](const std::string& pin) { return devices_.open(pin); };
  if (offload) {
    auto id = devices_.open(spec_.train.optimizer_device);
    if (!id)
      return make_error(spec_.path + ": [train] optimizer_device = \"" + spec_.train.optimizer_device +
                            "\": " + id.error().message,
                        id.error().status);
    if (*id == device_.id())
      log_info("[train] optimizer_device " + *id + " is the device the run trains on: nothing to offload");
    else
      o.optimizer_device = *id;
  }
  if (automatic)
    if (auto r = place_automatically(candidates, o); !r) return r.error();
  return true;
}

// Every unpinned layer where the devices stay within their budgets and the
// estimated step is fastest (place/auto_placement.hpp).
Result<void> Program::place_automatically(std::vector<std::string>& candidates, place::PlacementOptions& o) {
  // Pinned devices are devices of the run too: unpinned layers may join
  // them, and every device's costs are measured up front.
  for (const model::LayerSpec& layer : spec_.layers)
    if (layer.device)  // a bad pin is reported by placement, with its line
      if (auto id = devices_.open(*layer.device);
          id && std::find(candidates.begin(), candidates.end(), *id) == candidates.end())
        candidates.push_back(*id);
  place::CostModel costs(devices_.by_id(), cost_options());
  place::WorkspaceCache workspaces;
  place::AutoPlacementInputs in{o, candidates, estimate_inputs(&costs, &workspaces, true)};
  in.estimate.pipelined = pipeline_possible(candidates);
  auto chosen = place::place_automatically(model_.graph, spec_, in);
  Result<void> streaming = chosen ? prefer_streaming(*chosen, o, in.estimate) : Result<void>{};
  if (auto saved = costs.save(); !saved) log_warning(saved.error().message);
  if (!chosen) return chosen.error();
  if (!streaming) return streaming.error();
  if (costs.calibrated() > 0)
    log_info("calibrated " + std::to_string(costs.calibrated()) +
             " op costs for automatic placement (cached in " + costs.cache_file(device_.id()) +
             " and beside it)");
  if (!chosen->fits)
    return make_error(place::does_not_fit(chosen->estimate, fit_context()), TDM_OUT_OF_MEMORY);
  o.layer_devices = chosen->layer_devices;
  automatic_ = std::move(*chosen);
  return {};
}

// Moving state instead of computation: every layer on the default device
// with the fewest streamed layers that fit, when automatic placement moved
// a layer elsewhere (or found nothing that fits) and that is faster.
Result<void> Program::prefer_streaming(place::AutoPlacement& chosen, const place::PlacementOptions& o,
                                       const place::EstimateInputs& in) {
  const bool pinned = std::any_of(spec_.layers.begin(), spec_.layers.end(),
                                  [](const model::LayerSpec& l) { return l.device.has_value(); });
  const bool moved = std::any_of(chosen.layer_devices.begin(), chosen.layer_devices.end(),
                                 [&](const auto& layer) { return layer.second != device_.id(); });
  if (pinned || !o.optimizer_device.empty() || (chosen.fits && !moved)) return {};
  auto alternative = fewest_streamed(in);
  if (!alternative) return alternative.error();
  if (!*alternative) return {};
  const double streamed_us = (*alternative)->estimate.step_us();
  const double placed_us = chosen.estimate.step_us_as_run();
  if (chosen.fits && streamed_us >= placed_us) return {};
  adopt(**alternative,
        chosen.fits
            ? "streaming on " + device_.id() + " (estimated step " + human_duration_us(streamed_us) +
                  ") is faster than moving layers to other devices (" + human_duration_us(placed_us) + ")"
            : "no placement of the layers on the devices fits");
  for (auto& [layer, device] : chosen.layer_devices) device = device_.id();
  chosen.estimate = (*alternative)->estimate;
  chosen.fits = true;
  return {};
}

// Several devices: the micro-batches of a training step pipelined over them
// where there are several and the model file does not turn it off.
Result<std::unique_ptr<exec::Executor>> Program::make_placed(const exec::ExecutorOptions& options) const {
  const bool pipelined = options_.mode == lowering::Mode::Train && micro_batches_ > 1 && spec_.train.pipeline;
  if (!pipelined) {
    auto placed = place::make_placed_executor(devices_.by_id(), model_.graph, *placement_, options,
                                              options_.memory_budgets);
    if (!placed) return placed.error();
    return std::unique_ptr<exec::Executor>(std::move(*placed));
  }
  // The order of micro_batch_inputs.
  exec::PipelineRequest request{micro_batches_, model_.optimizer_begin, {model_.input, model_.labels}, {}};
  request.value_name = [this](ValueId v) {
    const Value* value = model_.graph.value(v);
    return value != nullptr ? value->name : std::to_string(v);
  };
  if (model_.dropout_step != kNoValue) request.per_micro_batch.push_back(model_.dropout_step);
  pipeline_declined_.clear();
  auto placed = place::make_pipelined_executor(devices_.by_id(), model_.graph, *placement_, options,
                                               options_.memory_budgets, request, pipeline_declined_);
  if (placed && !pipeline_declined_.empty())
    log_info("the " + std::to_string(micro_batches_) +
             " micro-batches of a step run one after another: " + pipeline_declined_);
  return placed;
}

std::vector<exec::ConstBytes> Program::micro_batch_inputs(exec::ConstBytes input, exec::ConstBytes labels,
                                                          const int64_t& dropout_offset) const {
  std::vector<exec::ConstBytes> inputs = {input, labels};
  if (model_.dropout_step != kNoValue) inputs.push_back({&dropout_offset, sizeof dropout_offset});
  return inputs;
}

bool Program::pipeline_wanted() const {
  if (stages_) return options_.mode == lowering::Mode::Train && micro_batches_ > 1 && spec_.train.pipeline;
  return placement_ && pipeline_possible(placement_->devices);
}

bool Program::pipeline_possible(const std::vector<std::string>& devices) const {
  if (options_.mode != lowering::Mode::Train || micro_batches_ < 2 || !spec_.train.pipeline ||
      devices.size() < 2)
    return false;
  return std::all_of(devices.begin(), devices.end(),
                     [&](const std::string& id) { return devices_.by_id().count(id) > 0; });
}

exec::PipelinedExecutor* Program::pipeline() const noexcept {
  return dynamic_cast<exec::PipelinedExecutor*>(executor_.get());
}

Result<std::unique_ptr<exec::Executor>> Program::make_executor(exec::ExecutorOptions options) const {
  const Graph& graph = model_.graph;
  const std::optional<place::Placement>& placement = placement_;
  if (stages_) return make_stage_executor(options);  // each rank holds one stage (plan: per stage)
  // Beyond a device's whole memory, a run with nowhere to move layers is
  // refused now rather than at its first step (several devices: running out
  // re-plans, replan_after_oom).
  const bool can_replan = devices_.count() > 1 && placement_mode_ != "strict";
  if (auto estimate = can_replan ? make_error("", TDM_INTERNAL)
                                 : place::estimate_plan(graph, placement ? &*placement : nullptr,
                                                        estimate_inputs(nullptr, nullptr, false))) {
    if (auto over = devices_.over_whole_memory(*estimate))
      return make_error(place::does_not_fit(*over, fit_context(true)), TDM_OUT_OF_MEMORY);
  }
  Result<std::unique_ptr<exec::Executor>> executor = make_error("", TDM_INTERNAL);
  if (!streamed_.empty()) {
    if (placement && !placement->only_on(device_.id()))
      return make_error(spec_.path + ": streamed layers with layers placed on " +
                            join_devices(placement->devices) +
                            ": streaming within a run placed on several devices is not supported yet; stream "
                            "on one device (drop --device's other devices and the pins), or do not stream",
                        TDM_UNSUPPORTED);
    if (options.streamed.empty()) options.streamed = streamed_;
    options.stream_depth = options_.stream_depth;
  }
  if (placement && !placement->only_on(device_.id())) {
    executor = make_placed(options);
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

}  // namespace tandem::host::program
