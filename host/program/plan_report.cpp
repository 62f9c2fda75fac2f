// `tandem plan`: what a training run would put where, without allocating.
// Memory per device comes from the same planner the executors use, on the
// same per-device graphs, with the layouts and kernel workspaces the
// executors would choose (kernel_prepare allocates no device memory); step
// time from the measured op and copy costs (place/cost_model.hpp).
#include <algorithm>
#include <cstdio>
#include <ostream>

#include "exec/pipeline_schedule.hpp"
#include "exec/tensor_text.hpp"
#include "lowering/zero_overlap.hpp"
#include "ops/op_table.hpp"
#include "place/plan_estimate.hpp"
#include "program/program.hpp"
#include "util/format.hpp"
#include "util/logger.hpp"

namespace tandem::host::program {
namespace {

std::string cell(uint64_t bytes) {
  return human_bytes(bytes);
}

// One row of the memory table: a name, then a column per device.
template <class Field>
void memory_row(std::ostream& out, const char* name, const std::vector<place::DeviceEstimate>& plans,
                Field field) {
  char line[64];
  std::snprintf(line, sizeof line, "  %-15s", name);
  out << line;
  for (const place::DeviceEstimate& p : plans) {
    std::snprintf(line, sizeof line, " %16s", field(p).c_str());
    out << line;
  }
  out << "\n";
}

// ZeRO stage 3: the most bytes of gathered whole parameters alive at once
// (each from its zero.all_gather, started a layer early where it overlaps
// compute, to its last reader), part of the
// activations the table counts.
uint64_t gather_window(const Graph& g) {
  std::vector<std::pair<size_t, size_t>> lives;  // [gather, last reader] positions
  std::vector<uint64_t> bytes;
  for (size_t i = 0; i < g.node_count(); ++i) {
    const Node& n = *g.node_at(i);
    if (ops::host_kind(n.op) != ops::HostKind::ZeroAllGather) continue;
    size_t last = i;
    for (ValueId v : {n.outputs[0], lowering::zero_exchange_result(g, n.outputs[0])})
      for (NodeId reader : g.consumers(v)) last = std::max(last, *g.position(reader));
    lives.emplace_back(i, last);
    bytes.push_back(exec::tensor_bytes(g.value(n.outputs[0])->type));
  }
  uint64_t most = 0;
  for (size_t i = 0; i < g.node_count(); ++i) {
    uint64_t now = 0;
    for (size_t k = 0; k < lives.size(); ++k)
      if (lives[k].first <= i && i <= lives[k].second) now += bytes[k];
    most = std::max(most, now);
  }
  return most;
}

void write_memory_table(std::ostream& out, const std::vector<place::DeviceEstimate>& plans) {
  char line[64];
  out << "\nmemory per device";
  for (const place::DeviceEstimate& p : plans) {
    std::snprintf(line, sizeof line, " %16s", p.device.c_str());
    out << line;
  }
  out << "\n";
  using E = place::DeviceEstimate;
  memory_row(out, "parameters", plans, [](const E& p) { return cell(p.memory.parameters); });
  memory_row(out, "gradients", plans, [](const E& p) { return cell(p.memory.gradients); });
  memory_row(out, "optimizer state", plans, [](const E& p) { return cell(p.memory.optimizer_state); });
  memory_row(out, "activations", plans, [](const E& p) { return cell(p.memory.activations); });
  memory_row(out, "workspace", plans, [](const E& p) { return cell(p.memory.workspace); });
  // The run's buffers beside the graph (data parallelism's bucket, ZeRO's
  // exchange buffer), where it has any.
  if (std::any_of(plans.begin(), plans.end(), [](const E& p) { return p.memory.buffers > 0; }))
    memory_row(out, "buffers", plans, [](const E& p) { return cell(p.memory.buffers); });
  memory_row(out, "other", plans, [](const E& p) {
    return cell(p.memory.other_state + p.memory.inputs + p.memory.allocator_rounding);
  });
  memory_row(out, "total", plans, [](const E& p) { return cell(p.memory.total); });
  const bool streaming =
      std::any_of(plans.begin(), plans.end(), [](const E& p) { return p.memory.window > 0; });
  if (streaming) {
    memory_row(out, "  of it window", plans, [](const E& p) { return cell(p.memory.window); });
    memory_row(out, "streamed (host)", plans, [](const E& p) { return cell(p.memory.streamed_home); });
  }
  memory_row(out, "budget", plans,
             [](const E& p) { return p.budget > 0 ? cell(p.budget) : std::string("none"); });
}

}  // namespace

Result<void> Program::write_plan(std::ostream& out) const {
  const bool placed = (placement_ && !placement_->only_on(device_.id())) || stages_;
  const place::Placement* placement = stages_ ? &stages_->placement : placed ? &*placement_ : nullptr;
  place::CostModel costs(devices_.by_id(), cost_options());
  if (stages_)  // every stage runs on a rank's device like this one
    for (const std::string& stage : stages_->devices) costs.measure_as(stage, device_.id());
  // Automatic placement estimated its choice already (against capacities;
  // the table shows the budgets the user gave).
  Result<place::PlanEstimate> estimate = make_error("", TDM_INTERNAL);
  if (automatic_) {
    estimate = automatic_->estimate;
    for (place::DeviceEstimate& d : estimate->devices) {
      auto budget = options_.memory_budgets.find(d.device);
      d.budget = budget == options_.memory_budgets.end() ? 0 : budget->second;
    }
  } else {
    estimate = place::estimate_plan(model_.graph, placement, estimate_inputs(&costs, nullptr, false));
    if (auto saved = costs.save(); !saved) log_warning(saved.error().message);
  }
  if (!estimate) return estimate.error();
  const std::vector<place::DeviceEstimate>& plans = estimate->devices;
  out << "plan for " << spec_.path << ": batch " << micro_batch_samples_ << " per micro-batch x "
      << micro_batches_ << ", " << plans.size()
      << (stages_
              ? " pipeline stages on ranks like this one's " + device_.id()
              : std::string(plans.size() == 1 ? " device" : " devices") + ", placement " + placement_mode_)
      << "\n";
  write_ranks(out);
  out << "\nlayers\n";
  write_layers(out);
  write_memory_table(out, plans);
  write_pipeline(out, *estimate);
  write_copies(out);
  write_streaming(out, plans);
  out << "\nestimated step time: " << human_duration_us(estimate->step_us()) << " =";
  for (size_t i = 0; i < plans.size(); ++i) {
    out << (i == 0 ? " compute " : " + ") << plans[i].device << " " << human_duration_us(plans[i].compute_us);
    if (plans[i].stream_exposed_us() > 0)
      out << " + streaming not hidden " << human_duration_us(plans[i].stream_exposed_us());
  }
  if (placed)
    out << " + " << (stages_ ? "messages" : "transfers") << " " << human_duration_us(estimate->transfer_us);
  if (estimate->stages > 1)
    out << "\n  pipelined: about " << human_duration_us(estimate->pipelined().step_us)
        << " (the pipeline's order on these stages' times, then the updates)";
  out << "\n  (measured op and copy costs, cached in " << costs.cache_file(device_.id())
      << " and beside it; copies counted as if nothing overlapped)\n";
  if (stages_ && estimate->over() > 0) return stages_do_not_fit(*estimate);
  if (estimate->over() > 0)
    return make_error(place::does_not_fit(*estimate, fit_context()), TDM_OUT_OF_MEMORY);
  if (auto over = devices_.over_whole_memory(*estimate))
    return make_error(place::does_not_fit(*over, fit_context(true)), TDM_OUT_OF_MEMORY);
  return {};
}

// Pipeline parallelism: the stages over the budget of their ranks' device,
// and what the run can change for them (streaming, another device and
// ZeRO do not combine with it yet).
Error Program::stages_do_not_fit(const place::PlanEstimate& estimate) const {
  std::string over;
  for (const place::DeviceEstimate& d : estimate.devices)
    if (d.over() > 0)
      over += (over.empty() ? "" : "; ") + std::string("stage ") + std::to_string(d.stage) + " needs " +
              human_bytes(d.memory.total) + " (activations " + human_bytes(d.memory.activations) + ", " +
              std::to_string(d.in_flight) + (d.in_flight == 1 ? " micro-batch" : " micro-batches") +
              " in flight), over its rank's budget of " + human_bytes(d.budget) + " by " +
              human_bytes(d.over());
  return make_error(spec_.path + " does not fit on " + device_.id() + " with " +
                        std::to_string(layout_.pipeline) + " pipeline stages: " + over +
                        ". To fit: more stages ([train] pipeline_parallel, over more ranks); smaller "
                        "micro-batches ([train] pipeline_microbatches); recompute activations with "
                        "[features.checkpointing]; hold one micro-batch in flight ([train] pipeline = "
                        "false, slower); or raise --memory-budget " +
                        device_.id(),
                    TDM_OUT_OF_MEMORY);
}

// How the run's ranks share the work, where there are several.
void Program::write_ranks(std::ostream& out) const {
  const ProcessGroup& ranks = options_.group;
  if (layout_.pipeline > 1) {
    out << "a grid of data " << layout_.data << " x tensor " << layout_.tensor << " x pipeline "
        << layout_.pipeline << " = " << ranks.world << " ranks: each pipeline of " << layout_.pipeline
        << " ranks holds the layers in " << layout_.pipeline << " stages, one per rank (the columns below)"
        << (layout_.tensor > 1 ? ", the layers marked parallel split over the " +
                                     std::to_string(layout_.tensor) + " ranks of each stage"
                               : std::string())
        << (layout_.data > 1
                ? "; " + std::to_string(layout_.data) + " pipelines, each with a batch of its own"
                : std::string())
        << "\n";
  } else if (ranks.world > 1) {
    out << "one rank of " << ranks.world;
    if (layout_.tensor > 1)
      out << ": the layers marked parallel hold 1/" << layout_.tensor
          << " of their weights here (tensor parallelism"
          << (layout_.data > 1 ? ", in each of " + std::to_string(layout_.data) +
                                     " groups with a batch of its own: data parallelism)\n"
                               : ")\n");
    else
      out << ", each with the whole model and a batch of its own (data parallelism)\n";
  }
  if (ranks.world > 1) {
    if (model_.zero.active())
      out << "ZeRO stage " << model_.zero.stage << ": each rank updates and keeps the optimizer state of 1/"
          << model_.zero.world << " of every parameter"
          << (model_.zero.stage >= 2 ? ", and its gradients averaged into that shard as backward makes them"
                                     : "")
          << (model_.zero.stage >= 3
                  ? "; it keeps only that shard of the parameters too, each layer's "
                    "gathered whole just before its forward and again before its backward\n"
                  : "; the updated shards are gathered into every rank's parameters\n");
    if (model_.zero.shards_parameters())
      out << "gather window: up to " << human_bytes(gather_window(model_.graph))
          << " of gathered whole parameters at once (within the activations below)\n";
  }
}

// A pipelined step: its stages, what each holds at once, the bubble.
void Program::write_pipeline(std::ostream& out, const place::PlanEstimate& estimate) const {
  if (estimate.stages < 2) return;
  // Interleaved: v chunks of the model a device, the bubble v times smaller.
  const size_t chunks = exec::model_chunks(estimate.shape, estimate.order, micro_batches_);
  const double bubble = exec::bubble_fraction(estimate.stages, chunks * micro_batches_);
  char line[160];
  std::snprintf(line, sizeof line, "%.1f %%", 100.0 * bubble);
  out << "\npipeline: " << estimate.stages << " stages x " << micro_batches_ << " micro-batches, ";
  if (chunks > 1)
    out << "interleaved one forward one backward over " << chunks
        << " chunks of the model a device; bubble (S-1)/(v*M+S-1) = " << line;
  else
    out << "one forward one backward; bubble (S-1)/(M+S-1) = " << line;
  if (estimate.timed) {
    std::snprintf(line, sizeof line, "%.1f %%", 100.0 * estimate.pipelined().idle);
    out << "; with these stages' estimated times " << line << " of device time idle";
  }
  out << "\n";
  const std::map<std::string, std::string> layers = layer_devices();
  for (int s = 0; s < static_cast<int>(estimate.stages); ++s)
    for (const place::DeviceEstimate& d : estimate.devices) {
      if (d.stage != s) continue;
      std::string first, last;
      for (const model::LayerSpec& layer : spec_.layers)
        if (auto it = layers.find(layer.name); it != layers.end() && it->second == d.device) {
          if (first.empty()) first = layer.name;
          last = layer.name;
        }
      out << "  stage " << s << " " << d.device << ": layers " << first
          << (last != first ? " .. " + last : "") << ", " << d.in_flight
          << (d.in_flight == 1 ? " micro-batch" : " micro-batches") << " in flight x "
          << human_bytes(d.per_micro_batch) << " (activations, inputs, workspace)\n";
    }
}

Result<void> Program::check_evaluation() const {
  ProgramOptions o;
  o.mode = lowering::Mode::Eval;
  o.group = options_.group;
  if (placement_ || stages_) {  // as Trainer::make_evaluator places it
    o.placement = placement_options_;
    o.open_devices = devices_.by_id();
  }
  auto eval = Program::build(spec_, device_, registry_, std::move(o));
  if (!eval) return eval.error();
  const Program& e = **eval;
  const bool placed = e.placement_ && !e.placement_->only_on(device_.id());
  auto estimate = place::estimate_plan(e.model_.graph, placed ? &*e.placement_ : nullptr,
                                       e.estimate_inputs(nullptr, nullptr, false));
  if (!estimate) {
    Error error = estimate.error();
    error.message = "the evaluation at each epoch's end cannot run as placed: " + error.message;
    return error;
  }
  return {};
}

// Each layer, its device (the first of its nodes that has one) and the
// bytes of its parameters.
void Program::write_layers(std::ostream& out) const {
  const Graph& g = model_.graph;
  char line[256];
  for (const model::LayerSpec& layer : spec_.layers) {
    std::string device = device_.id();
    for (size_t i = 0; i < g.node_count(); ++i)
      if (g.node_at(i)->layer == layer.name && !g.node_at(i)->device.empty()) {
        device = g.node_at(i)->device;
        break;
      }
    uint64_t params = 0;
    bool streamed = false;
    for (ValueId p : model_.parameters) {
      const Value& v = *g.value(p);
      if (v.name.rfind(layer.name + ".", 0) != 0) continue;
      params += exec::tensor_bytes(v.type);
      streamed = streamed || streamed_.count(v.name) > 0;
    }
    if (streamed) device += " streamed";
    std::snprintf(line, sizeof line, "  %-20s %-12s %-14s %12s%s%s\n", layer.name.c_str(), layer.op.c_str(),
                  device.c_str(), params > 0 ? cell(params).c_str() : "-",
                  layer.device ? "  (pinned)"
                  : automatic_ ? "  (auto)"
                               : "",
                  params > 0 && !layer.trainable ? "  (frozen)" : "");
    out << line;
  }
}

// The streamed layers' traffic between host memory and the device, which
// the copy stream runs beside compute (exec/streamed_state.hpp).
void Program::write_streaming(std::ostream& out, const std::vector<place::DeviceEstimate>& plans) const {
  if (streamed_.empty()) return;
  size_t layers = 0;
  for (const model::LayerSpec& layer : spec_.layers)
    for (ValueId p : model_.parameters)
      if (const std::string& name = model_.graph.value(p)->name;
          name.rfind(layer.name + ".", 0) == 0 && streamed_.count(name) > 0) {
        ++layers;
        break;
      }
  for (const place::DeviceEstimate& d : plans) {
    if (d.memory.streamed_home == 0) continue;
    out << "\nstreamed: " << layers << " layers' parameters, gradients and optimizer state ("
        << human_bytes(d.memory.streamed_home) << ") live in host memory; " << human_bytes(d.streamed_bytes)
        << " cross to and from " << d.device << " per step, fetched " << options_.stream_depth
        << (options_.stream_depth == 1 ? " layer" : " layers") << " ahead into a window of at most "
        << human_bytes(d.memory.window) << "\n";
    if (d.stream_us > 0)
      out << "  link time " << human_duration_us(d.stream_us) << " per step on a copy stream, beside "
          << human_duration_us(d.compute_us) << " of compute: "
          << (d.stream_exposed_us() > 0 ? human_duration_us(d.stream_exposed_us()) + " not hidden"
                                        : std::string("hidden"))
          << "\n";
  }
}

void Program::write_copies(std::ostream& out) const {
  const place::Placement* placement = stages_ ? &stages_->placement : placement_ ? &*placement_ : nullptr;
  const size_t copies = placement ? placement->copies.size() : 0;
  out << (stages_ ? "\nvalues sent between stages (each micro-batch, or step): " : "\ncopies per step: ")
      << copies;
  if (copies > 0) out << " (" << human_bytes(placement->copy_bytes()) << ")";
  out << "\n";
  if (!placement) return;
  char line[256];
  for (const place::Copy& c : placement->copies) {
    std::snprintf(line, sizeof line, "  %-24s %10s  %s -> %s  (layer '%s' -> '%s', %s)\n", c.value.c_str(),
                  human_bytes(c.bytes).c_str(), c.from.c_str(), c.to.c_str(), c.producer_layer.c_str(),
                  c.consumer_layer.c_str(),
                  c.phase == TDM_PHASE_FORWARD    ? "forward"
                  : c.phase == TDM_PHASE_BACKWARD ? "backward"
                                                  : "optimizer");
    out << line;
  }
}

}  // namespace tandem::host::program
