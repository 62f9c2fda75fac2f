#include "place/plan_estimate.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "exec/native_layouts.hpp"
#include "exec/pipeline_schedule.hpp"
#include "ops/op_table.hpp"
#include "place/split.hpp"

namespace tandem::host::place {

double PlanEstimate::step_us() const {
  double total = transfer_us;
  for (const DeviceEstimate& d : devices) total += d.compute_us + d.stream_exposed_us();
  return total;
}

PlanEstimate::Pipelined PlanEstimate::pipelined() const {
  // The optimizer phases run one device after another, and copies are
  // counted as in step_us(), as if none overlapped.
  double optimizer = transfer_us;
  for (const DeviceEstimate& d : devices) optimizer += d.compute_us - d.forward_us - d.backward_us;
  // An order that cannot finish: the executor runs the micro-batches one
  // after another instead.
  Pipelined out{step_us(), 0.0};
  if (auto t = exec::simulate(shape, order)) {
    out.step_us = t->makespan + optimizer;
    out.idle = t->idle_fraction();
  }
  return out;
}

uint64_t PlanEstimate::over() const {
  uint64_t total = 0;
  for (const DeviceEstimate& d : devices) total += d.over();
  return total;
}

const DeviceEstimate* PlanEstimate::find(const std::string& device) const {
  for (const DeviceEstimate& d : devices)
    if (d.device == device) return &d;
  return nullptr;
}

Result<size_t> WorkspaceCache::workspace(const DeviceHandle& device, const exec::OpSpec& spec) {
  std::string key = device.id() + "|" + op_cost_key(spec) + "|";
  for (uint8_t l : spec.layouts) key += static_cast<char>('0' + l);
  if (auto it = bytes_.find(key); it != bytes_.end()) return it->second;
  auto kernel = exec::KernelBinding::prepare(device, spec);
  if (!kernel) return kernel.error();
  return bytes_[key] = kernel->workspace_bytes();
}

Result<exec::Plan> plan_memory(const DeviceHandle& device, const Graph& graph,
                               const std::set<std::string>& keep, const std::set<std::string>& staged,
                               WorkspaceCache& workspaces, const std::set<std::string>& stream,
                               size_t stream_depth, int zero_world) {
  exec::StreamRequest request;
  request.depth = stream_depth;
  for (const std::string& name : stream)
    if (const Value* v = graph.value_by_name(name)) request.values.insert(v->id);
  std::set<ValueId> outputs;
  for (const std::string& name : keep)
    if (const Value* v = graph.value_by_name(name)) outputs.insert(v->id);
  const exec::LayoutPlan layouts = exec::decide_layouts(device, graph, outputs);
  std::vector<size_t> workspace;
  for (size_t i = 0; i < graph.node_count(); ++i) {
    const Node& n = *graph.node_at(i);
    if (ops::is(n.op, ops::kHostRun)) {
      workspace.push_back(exec::zero_scratch_bytes(graph, n, zero_world));
      continue;
    }
    auto spec = exec::op_spec_of(graph, n);
    if (!spec) return spec.error();
    spec->layouts = layouts.node_layouts(n);
    auto bytes = workspaces.workspace(device, *spec);
    if (!bytes) return bytes.error();
    workspace.push_back(*bytes);
  }
  auto plan = exec::make_plan(
      graph, workspace, outputs, layouts.native, 0,
      [&device](uint64_t bytes) { return device.allocation_footprint(bytes); },
      device.takes_sums_over_operands(), request);
  if (!plan) return plan;
  if (zero_world > 1)
    if (const size_t staging = exec::exchange_staging_bytes(graph, zero_world); staging > 0)
      exec::plan_buffer(*plan, staging);
  for (const std::string& name : staged)
    if (const Value* v = graph.value_by_name(name))
      if (auto r = exec::plan_staged_input(*plan, v->id); !r) return r.error();
  return plan;
}

namespace {

// Runs per optimizer step of a node of this phase.
double runs(tdm_phase phase, uint32_t micro_batches) {
  return phase == TDM_PHASE_OPTIMIZER ? 1.0 : static_cast<double>(micro_batches);
}

Result<DeviceEstimate> estimate_device(const std::string& id, const Graph& graph, std::set<std::string> keep,
                                       const EstimateInputs& in) {
  auto handle = in.devices.find(id);
  if (handle == in.devices.end())
    return make_error("the plan uses " + id + ", which this run did not open (internal)", TDM_INTERNAL);
  DeviceEstimate d;
  d.device = id;
  if (auto b = in.budgets.find(id); b != in.budgets.end()) d.budget = b->second;
  auto plan = plan_memory(*handle->second, graph, keep, in.staged, *in.workspaces, in.streamed,
                          in.stream_depth, in.zero_world);
  if (!plan) return plan.error();
  d.memory = plan->estimate;
  for (const exec::Residency& r : plan->residencies) {
    const uint64_t bytes = plan->persistent[plan->values.at(r.value).persistent].bytes;
    const double copies = runs(graph.node_at(r.first())->phase, in.micro_batches) * (r.fetch + r.write_home);
    d.streamed_bytes += static_cast<uint64_t>(copies * static_cast<double>(bytes));
    if (in.costs == nullptr || copies == 0) continue;
    auto t = in.costs->host_link_micros(id, bytes);
    if (!t) return t.error();
    d.stream_us += copies * *t;
  }
  if (in.costs == nullptr) return d;
  for (size_t i = 0; i < graph.node_count(); ++i) {
    const Node& n = *graph.node_at(i);
    if (ops::is(n.op, ops::kHostRun)) continue;  // collectives and copies: not a kernel
    auto spec = exec::op_spec_of(graph, n);
    if (!spec) return spec.error();
    auto cost = in.costs->op(id, *spec);
    if (!cost) return cost.error();
    // Operands beyond the device's memory: the memory estimate says so.
    if (!cost->supported && cost->no_memory) continue;
    if (!cost->supported)
      return make_error("layer '" + n.layer + "' (" + n.op + ") cannot run on " + id + ": " + cost->why,
                        TDM_UNSUPPORTED);
    const double us = cost->micros * runs(n.phase, in.micro_batches);
    d.compute_us += us;
    if (n.phase == TDM_PHASE_FORWARD) d.forward_us += us;
    if (n.phase == TDM_PHASE_BACKWARD) d.backward_us += us;
  }
  return d;
}

// A pipelined step's stages (exec/pipeline_schedule.hpp), coarsely: the
// devices with forward or backward nodes, in the order their first such node
// runs; each device's segments the runs of its consecutive nodes in the
// global schedule (one direction each), every run waiting for the one
// before it on another device; a segment's cost its ops' measured time (one
// per node without a cost model). The order the executor would choose
// (interleaved where every device holds several chunks) gives each device
// its micro-batches in flight, each with its own activations, inputs and
// workspace.
Result<void> plan_stages(const SplitGraph& split, const EstimateInputs& in, PlanEstimate& out) {
  struct Run {
    size_t position, device;
    bool backward;
    double cost;
  };
  std::vector<Run> nodes;
  for (size_t d = 0; d < split.devices.size(); ++d) {
    const DeviceGraph& part = split.devices[d];
    for (size_t i = 0; i < part.graph.node_count(); ++i) {
      const Node& n = *part.graph.node_at(i);
      if (n.phase == TDM_PHASE_OPTIMIZER) continue;
      double cost = 1;
      if (in.costs != nullptr && !ops::is(n.op, ops::kHostRun)) {
        auto spec = exec::op_spec_of(part.graph, n);
        if (!spec) return spec.error();
        auto c = in.costs->op(part.device, *spec);
        if (!c) return c.error();
        cost = c->supported ? c->micros : 0;
      }
      nodes.push_back({part.positions[i], d, n.phase == TDM_PHASE_BACKWARD, cost});
    }
  }
  std::sort(nodes.begin(), nodes.end(), [](const Run& a, const Run& b) { return a.position < b.position; });
  std::map<size_t, size_t> stage_of;  // device index -> stage
  for (const Run& n : nodes)
    if (stage_of.count(n.device) == 0) stage_of.emplace(n.device, stage_of.size());
  out.stages = stage_of.size();
  out.shape.stages.assign(out.stages, {});
  std::optional<exec::SegmentRef> previous;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Run& n = nodes[k];
    const size_t s = stage_of.at(n.device);
    const bool same = k > 0 && nodes[k - 1].device == n.device && nodes[k - 1].backward == n.backward;
    if (!same) {
      exec::PipelineSegment segment{n.backward, 0, {}, {}};
      if (previous && previous->stage != s) segment.after.push_back(*previous);
      out.shape.stages[s].push_back(segment);
      previous = exec::SegmentRef{s, out.shape.stages[s].size() - 1};
    }
    out.shape.stages[s].back().cost += n.cost;
  }
  const size_t micro = std::max<uint32_t>(in.micro_batches, 1);
  auto interleaved = exec::interleaved_one_forward_one_backward(out.shape, micro);
  const bool runs = interleaved && exec::simulate(out.shape, *interleaved).has_value();
  out.order = runs ? std::move(*interleaved) : exec::one_forward_one_backward(out.shape, micro);
  for (const auto& [device, stage] : stage_of) {
    DeviceEstimate& d = out.devices[device];
    d.stage = static_cast<int>(stage);
    d.in_flight = out.order.in_flight[stage];
    exec::MemoryEstimate& m = d.memory;
    d.per_micro_batch = m.activations + m.workspace + m.inputs;
    const uint64_t more = (d.in_flight - 1) * d.per_micro_batch;
    m.activations += (d.in_flight - 1) * m.activations;
    m.workspace += (d.in_flight - 1) * m.workspace;
    m.inputs += (d.in_flight - 1) * m.inputs;
    m.total += more;
  }
  return {};
}

}  // namespace

Result<PlanEstimate> estimate_plan(const Graph& graph, const Placement* placement, const EstimateInputs& in) {
  PlanEstimate out;
  out.timed = in.costs != nullptr;
  WorkspaceCache local;
  EstimateInputs inputs = in;
  if (inputs.workspaces == nullptr) inputs.workspaces = &local;
  if (placement == nullptr || placement->devices.size() <= 1) {
    const std::string id = placement != nullptr ? placement->devices.front() : in.default_device;
    auto d = estimate_device(id, graph, in.keep, inputs);
    if (!d) return d.error();
    out.devices.push_back(std::move(*d));
    return out;
  }
  auto split = split_by_device(graph, *placement);
  if (!split) return split.error();
  for (const DeviceGraph& part : split->devices) {
    std::set<std::string> keep = in.keep;
    keep.insert(part.exported.begin(), part.exported.end());
    auto d = estimate_device(part.device, part.graph, keep, inputs);
    if (!d) return d.error();
    out.devices.push_back(std::move(*d));
  }
  if (in.pipelined)
    if (auto r = plan_stages(*split, in, out); !r) return r.error();
  for (const Copy& c : placement->copies) {
    ++out.copies;
    out.copy_bytes += c.bytes;
    if (in.costs == nullptr) continue;
    auto t = in.costs->copy_micros(c.from, c.to, c.bytes);
    if (!t) return t.error();
    out.transfer_us += *t * runs(c.phase, in.micro_batches);
  }
  return out;
}

}  // namespace tandem::host::place
