// Program: pipeline parallelism across ranks ([train] pipeline_parallel):
// the layers cut into stages, each rank's executor over its stage
// (exec/rank_pipeline.hpp, place/stage_cut.hpp).
#include <algorithm>
#include <cstdio>

#include "exec/device_executor.hpp"
#include "exec/kernel_binding.hpp"
#include "place/cost_model.hpp"
#include "place/placed_executor.hpp"
#include "place/stage_cut.hpp"
#include "program/program.hpp"
#include "util/format.hpp"
#include "util/logger.hpp"

namespace tandem::host::program {

// What runs alongside the pipeline is refused before anything is measured.
Result<void> Program::check_stages_compose() const {
  const std::string key = spec_.path + ": [train] pipeline_parallel = " + std::to_string(layout_.pipeline);
  for (const model::LayerSpec& layer : spec_.layers)
    if (layer.device)
      return make_error(key + " places the layers itself (each stage on its rank's device); layer '" +
                            layer.name + "' pins device = \"" + *layer.device + "\": remove the pin",
                        TDM_INVALID_ARGUMENT);
  if (!options_.devices.empty() || !spec_.train.optimizer_device.empty())
    return make_error(key +
                          " runs each stage on one device per rank: devices beside it (--device with "
                          "several, [train] optimizer_device) are not supported with it yet",
                      TDM_UNSUPPORTED);
  if (model_.zero.active() && model_.zero.stage > 1)
    return make_error(
        key + " with [train] zero = " + std::to_string(model_.zero.stage) +
            " is not supported: train with zero = 1 (as DeepSpeed, whose pipelines take stage 1 "
            "only: each stage already holds only its layers' state)",
        TDM_UNSUPPORTED);
  if (!streamed_.empty())
    return make_error(key +
                          " with streamed layers is not supported yet: train with --no-stream, or "
                          "with more stages",
                      TDM_UNSUPPORTED);
  return {};
}

// Each layer's measured forward and backward time on this rank's device.
Result<std::map<std::string, double>> Program::layer_costs() const {
  place::CostModel costs({{device_.id(), &device_}}, cost_options());
  std::map<std::string, double> out;
  const Graph& g = model_.graph;
  for (size_t i = 0; i < g.node_count(); ++i) {
    const Node& n = *g.node_at(i);
    if (n.layer.empty() || n.phase == TDM_PHASE_OPTIMIZER || ops::is(n.op, ops::kHostRun)) continue;
    auto spec = exec::op_spec_of(g, n);
    if (!spec) return spec.error();
    auto cost = costs.op(device_.id(), *spec);
    if (!cost) return cost.error();
    if (cost->supported) out[n.layer] += cost->micros;
  }
  if (auto saved = costs.save(); !saved) log_warning(saved.error().message);
  return out;
}

// Each layer's stage: where [train] pipeline_cut says, else balanced on
// the measured costs.
Result<std::vector<size_t>> Program::cut_layers(size_t stages) const {
  if (!spec_.train.pipeline_cut.empty()) return place::cut_at(spec_, spec_.train.pipeline_cut, stages);
  // Only the first rank's timings decide (agree): the others need not measure.
  const bool measure = !options_.agree || options_.group.rank == 0;
  auto costs =
      measure ? layer_costs() : Result<std::map<std::string, double>>(std::map<std::string, double>{});
  if (!costs) return costs.error();
  return place::cut_into_stages(spec_, *costs, stages);
}

Result<void> Program::place_stages() {
  if (auto r = check_stages_compose(); !r) return r;
  const size_t count = size_t(layout_.pipeline);
  Stages stages;
  for (size_t k = 0; k < count; ++k) stages.devices.push_back(place::stage_device(device_.id(), k));
  place::PlacementOptions o;
  if (options_.placement) {  // an evaluation: the stages of its training run
    o = *options_.placement;
  } else {
    auto cut = cut_layers(count);
    if (!cut) return cut.error();
    // Timings differ from rank to rank: every rank takes the first's cut.
    if (options_.agree)
      if (auto r = options_.agree(*cut); !r) return r;
    for (size_t l = 0; l < spec_.layers.size(); ++l)
      o.layer_devices[spec_.layers[l].name] = stages.devices[(*cut)[l]];
    o.default_device = stages.devices.front();
  }
  auto placement = place::place_layers(model_.graph, spec_, o);
  if (!placement) return placement.error();
  auto split = place::split_by_device(model_.graph, *placement);
  if (!split) return split.error();
  for (const auto& [layer, device] : o.layer_devices)
    for (size_t k = 0; k < count; ++k)
      if (device == stages.devices[k]) stages.layer_stage[layer] = k;
  stages.placement = std::move(*placement);
  stages.split = std::move(*split);
  placement_options_ = std::move(o);
  stages_ = std::move(stages);
  if (options_.mode == lowering::Mode::Train && options_.group.rank == 0) log_info(describe_stages());
  return {};
}

// "pipeline of 2 stages: fc1 | fc2, fc3; 4 micro-batches a step, ...".
std::string Program::describe_stages() const {
  std::string text = "pipeline of " + std::to_string(stages_->devices.size()) + " stages:";
  size_t stage = 0;
  for (const model::LayerSpec& layer : spec_.layers) {
    const size_t k = stages_->layer_stage.at(layer.name);
    text += k == stage && text.back() != ':' ? ", " : (text.back() == ':' ? " " : " | ");
    text += layer.name;
    stage = k;
  }
  const size_t p = stages_->devices.size(), m = micro_batches_;
  char bubble[64];
  std::snprintf(bubble, sizeof bubble, "%.1f %%", 100.0 * double(p - 1) / double(m + p - 1));
  return text + "; " + std::to_string(m) + " micro-batch" + (m == 1 ? "" : "es") + " a step, " +
         (spec_.train.pipeline
              ? "one forward, one backward (bubble (P-1)/(M+P-1) = " + std::string(bubble) + ")"
              : std::string("one after another ([train] pipeline = false)"));
}

// This rank's stage: its first instance and one more per further
// micro-batch it holds at once, bound to the first's persistent values but
// those of one micro-batch.
Result<std::unique_ptr<exec::Executor>> Program::make_stage_executor(
    const exec::ExecutorOptions& options) const {
  if (options.stage_link == nullptr)
    return make_error("pipeline_parallel: no link to the other stages (internal)", TDM_INTERNAL);
  const bool train = options_.mode == lowering::Mode::Train;
  place::StagePipelineRequest request;
  request.micro_batches = train ? micro_batches_ : 1;
  request.pipelined = train && spec_.train.pipeline;
  request.optimizer_begin = model_.optimizer_begin;
  request.stage_devices = stages_->devices;
  for (ValueId v : {model_.input, model_.labels, model_.dropout_step})
    if (v != kNoValue) request.per_micro_batch.push_back(model_.graph.value(v)->name);
  auto layout = place::plan_stage_pipeline(stages_->split, stages_->placement.home, request);
  if (!layout) return layout.error();
  for (ValueId v : {model_.input, model_.labels, model_.dropout_step})
    if (v != kNoValue) layout->inputs.push_back(v);
  const size_t stage = size_t(layout_.pipeline_rank);
  const place::DeviceGraph& mine =
      *std::find_if(stages_->split.devices.begin(), stages_->split.devices.end(),
                    [&](const place::DeviceGraph& d) { return d.device == stages_->devices[stage]; });
  exec::ExecutorOptions sub = place::part_options(mine, options);
  sub.collectives = options.collectives;            // tensor parallelism within the stage
  sub.data_collectives = options.data_collectives;  // ZeRO over the stage's data-parallel peers
  const auto budget = options_.memory_budgets.find(device_.id());
  if (budget != options_.memory_budgets.end()) sub.memory_budget = budget->second;
  auto first = exec::DeviceExecutor::create(device_, mine.graph, sub);
  if (!first) return first.error();
  // What each micro-batch in flight has its own of: the batch, and what other stages send it.
  std::set<ValueId> own;
  const auto keep_own = [&](ValueId v) {
    if (const exec::ValueStorage* s = (*first)->plan().find(v)) own.insert(s->owner);
  };
  for (const auto& [value, input] : layout->feeds[stage]) keep_own(value);
  for (const exec::StageMessage& m : layout->messages)
    if (m.when == exec::StageMessage::When::MicroBatch && m.to == int(stage)) keep_own(m.destination);
  exec::ExecutorOptions more = sub;
  for (const exec::PersistentBuffer& b : (*first)->plan().persistent)
    if (own.count(b.value) == 0) more.external[b.name] = (*first)->device_pointer(b.value);
  // The budget counts what each further instance allocates itself.
  uint64_t held = (*first)->allocated_bytes();
  std::vector<std::unique_ptr<exec::DeviceExecutor>> instances;
  for (size_t j = 1; j < layout->order.in_flight[stage]; ++j) {
    auto e = exec::DeviceExecutor::create(device_, mine.graph, more);
    if (!e) return e.error();
    held += (*e)->allocated_bytes();
    if (budget != options_.memory_budgets.end() && held > budget->second)
      return make_error(device_.id() + ": the activations of micro-batch " + std::to_string(j + 1) +
                            " of the " + std::to_string(layout->order.in_flight[stage]) + " pipeline stage " +
                            std::to_string(stage) + " holds at once take it to " + human_bytes(held) +
                            ", over its budget of " + human_bytes(budget->second) +
                            "; raise the budget, use more stages ([train] pipeline_parallel), or run the "
                            "micro-batches one after another ([train] pipeline = false: one in flight)",
                        TDM_OUT_OF_MEMORY);
    instances.push_back(std::move(*e));
  }
  return std::unique_ptr<exec::Executor>(std::make_unique<exec::RankPipelineExecutor>(
      std::move(*first), std::move(instances), std::move(*layout), *options.stage_link,
      model_.graph.node_count()));
}

exec::MicroBatchPipeline* Program::micro_batch_pipeline() const noexcept {
  return dynamic_cast<exec::MicroBatchPipeline*>(executor_.get());
}

exec::RankPipelineExecutor* Program::rank_pipeline() const noexcept {
  return dynamic_cast<exec::RankPipelineExecutor*>(executor_.get());
}

}  // namespace tandem::host::program
