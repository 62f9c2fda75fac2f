// A DeviceExecutor's creation: kernels prepared for the layouts decided,
// the memory plan checked against the budget, then every buffer allocated
// and every node bound to its addresses.
#include <algorithm>
#include <set>
#include <utility>

#include "exec/collectives.hpp"
#include "exec/device_executor.hpp"
#include "exec/native_layouts.hpp"
#include "exec/planner.hpp"
#include "exec/tensor_text.hpp"
#include "util/format.hpp"
#include "util/last_error.hpp"

namespace tandem::host::exec {
namespace {

Result<std::set<ValueId>> output_ids(const Graph& graph, const std::vector<std::string>& names) {
  std::set<ValueId> outputs;
  for (const std::string& name : names) {
    const Value* v = graph.value_by_name(name);
    if (v == nullptr)
      return make_error("output value '" + name + "' is not in the graph", TDM_INVALID_ARGUMENT);
    outputs.insert(v->id);
  }
  return outputs;
}

// One kernel per node, none for a host-run collective (the host runs it
// with the collectives of its group of ranks); `workspace` gets each node's
// workspace bytes (a ZeRO node's padding buffer).
Result<std::vector<std::optional<KernelBinding>>> prepare_kernels(const DeviceHandle& device,
                                                                  const Graph& graph,
                                                                  const LayoutPlan& layouts,
                                                                  const ExecutorOptions& options,
                                                                  std::vector<size_t>& workspace) {
  std::vector<std::optional<KernelBinding>> kernels;
  for (size_t i = 0; i < graph.node_count(); ++i) {
    const Node& node = *graph.node_at(i);
    if (ops::is(node.op, ops::kCollective)) {
      const bool zero = ops::data_parallel(ops::find(node.op)->host);
      const Collectives* c = zero ? options.data_collectives : options.collectives;
      if (c == nullptr)
        return make_error("node '" + node.name + "' (layer '" + node.layer + "', " + node.op +
                              ") exchanges data with the other ranks of a " +
                              (zero ? "data-parallel run sharing its optimizer state ([train] zero)"
                                    : "tensor-parallel run") +
                              ", but this run has none: launch it with mpirun, or remove " +
                              (zero ? "`zero` from [train]" : "`parallel` from the layer"),
                          TDM_INVALID_ARGUMENT);
      workspace.push_back(zero ? zero_scratch_bytes(graph, node, c->world()) : 0);
      kernels.emplace_back(std::nullopt);
      continue;
    }
    auto spec = op_spec_of(graph, node);
    if (!spec) return spec.error();
    spec->layouts = layouts.node_layouts(node);
    auto kernel = KernelBinding::prepare(device, *spec);
    if (!kernel) return kernel.error();
    workspace.push_back(kernel->workspace_bytes());
    kernels.push_back(std::move(kernel.value()));
  }
  return kernels;
}

Result<StreamRequest> stream_request(const Graph& graph, const ExecutorOptions& options) {
  StreamRequest request;
  request.depth = std::max<size_t>(options.stream_depth, 1);
  for (const std::string& name : options.streamed) {
    const Value* v = graph.value_by_name(name);
    if (v == nullptr)
      return make_error("streamed value '" + name + "' is not in the graph", TDM_INVALID_ARGUMENT);
    request.values.insert(v->id);
  }
  return request;
}

}  // namespace

DeviceExecutor::Buffer::Buffer(Buffer&& other) noexcept
    : device(other.device), pointer(std::exchange(other.pointer, nullptr)) {}

DeviceExecutor::Buffer::~Buffer() {
  if (pointer != nullptr) device->allocator().free(pointer);
}

void DeviceExecutor::StreamDeleter::operator()(tdm_stream* stream) const noexcept {
  if (stream != nullptr) api->stream_destroy(stream);
}

DeviceExecutor::DeviceExecutor(const DeviceHandle& device, ExecutorOptions options)
    : device_(&device),
      options_(std::move(options)),
      stream_(nullptr, StreamDeleter{device.backend().backend}) {}

DeviceExecutor::~DeviceExecutor() {
  // Staged copies in flight write the spare input buffers: they finish
  // first. Nothing may be released while a stream still uses it.
  staged_.reset();
  if (exchanges_) (void)drain_exchanges();
  exchanges_.reset();
  streamed_.reset();
  if (stream_) (void)api().stream_synchronize(stream_.get());
}

Result<std::unique_ptr<DeviceExecutor>> DeviceExecutor::create(const DeviceHandle& device, const Graph& graph,
                                                               ExecutorOptions options) {
  std::unique_ptr<DeviceExecutor> executor(new DeviceExecutor(device, std::move(options)));
  auto outputs = output_ids(graph, executor->options_.outputs);
  if (!outputs) return outputs.error();
  // Layouts are decided before prepare: a kernel is built for them (ABI 1.3).
  const LayoutPlan layouts = decide_layouts(device, graph, *outputs);
  std::vector<size_t> workspace;
  auto kernels = prepare_kernels(device, graph, layouts, executor->options_, workspace);
  if (!kernels) return kernels.error();
  const size_t guard = executor->options_.numerics.bounds ? kBoundsGuardBytes : 0;
  auto stream = stream_request(graph, executor->options_);
  if (!stream) return stream.error();
  auto plan = make_plan(
      graph, workspace, *outputs, layouts.native, guard,
      [&device](uint64_t bytes) { return device.allocation_footprint(bytes); },
      device.takes_sums_over_operands(), *stream);
  if (!plan) return plan.error();
  executor->plan_ = std::move(plan.value());
  const Collectives* data = executor->options_.data_collectives;
  const size_t staging = data != nullptr ? exchange_staging_bytes(graph, data->world()) : 0;
  if (staging > 0) plan_buffer(executor->plan_, staging);
  if (auto r = executor->check_budget(executor->plan_.estimate); !r) return r.error();
  if (auto r = executor->create_stream(); !r) return r.error();
  if (auto allocated = executor->allocate(graph); !allocated) return allocated.error();
  if (auto bound = executor->bind_nodes(graph, std::move(*kernels)); !bound) return bound.error();
  if (auto r = executor->prepare_exchanges(graph, staging); !r) return r.error();
  executor->profile_.time_us.assign(executor->nodes_.size(), 0.0);
  return executor;
}

Result<void> DeviceExecutor::check_budget(const MemoryEstimate& e) const {
  const uint64_t budget = options_.memory_budget;
  if (budget == 0 || e.total <= budget) return {};
  return make_error(
      device_->id() + " needs " + human_bytes(e.total) + " (parameters " + human_bytes(e.parameters) +
          ", gradients " + human_bytes(e.gradients) + ", optimizer state " + human_bytes(e.optimizer_state) +
          ", activations " + human_bytes(e.activations) + ", workspace " + human_bytes(e.workspace) +
          (e.buffers > 0 ? ", run buffers " + human_bytes(e.buffers) : std::string()) + ", other " +
          human_bytes(e.other_state + e.inputs + e.allocator_rounding) + ") but its memory budget is " +
          human_bytes(budget) + ": over by " + human_bytes(e.total - budget),
      TDM_OUT_OF_MEMORY);
}

Result<void> DeviceExecutor::create_stream() {
  tdm_stream* stream = nullptr;
  clear_last_error();
  tdm_status status = api().stream_create(device_->get(), &stream);
  if (status != TDM_OK || stream == nullptr)
    return make_error("cannot create a stream on " + device_->id() + ": " + plugin_reason(status),
                      status != TDM_OK ? status : TDM_INTERNAL);
  stream_.reset(stream);
  return {};
}

Result<void*> DeviceExecutor::alloc(size_t bytes, const std::string& what, std::optional<size_t> counted) {
  auto pointer = device_->allocator().allocate(bytes, what);
  if (!pointer) return pointer.error();
  buffers_.emplace_back(*device_, *pointer);
  allocated_ += counted.value_or(bytes);
  held_.total += DeviceAllocator::rounded(bytes);
  return pointer;
}

// The persistent values this executor owns, in one allocation (planner.hpp
// says why): each at a kPersistentAlignment offset, with --check-bounds'
// guard after it.
Result<void> DeviceExecutor::allocate_persistent() {
  std::vector<size_t> offsets(plan_.persistent.size(), 0);
  size_t block = 0, values = 0, count = 0, last = 0;
  for (size_t i = 0; i < plan_.persistent.size(); ++i) {
    if (plan_.persistent[i].streamed) continue;  // at home in host memory
    if (persistent_[i] != nullptr) {
      external_[i] = true;  // another executor's buffer: no guard after it
      continue;
    }
    offsets[i] = block;
    block += persistent_slot(plan_.persistent[i].bytes + plan_.guard_bytes);
    bytes_of(held_, plan_.persistent[i].category) +=
        persistent_slot(plan_.persistent[i].bytes + plan_.guard_bytes);
    values += plan_.persistent[i].bytes + plan_.guard_bytes;
    ++count;
    last = i;
  }
  if (count == 0) return {};
  const std::string what = count == 1
                               ? "'" + plan_.persistent[last].name + "'"
                               : "the " + std::to_string(count) +
                                     " persistent values (parameters, gradients, optimizer state, inputs)";
  auto pointer = alloc(block, what, values);
  if (!pointer) return pointer.error();
  for (size_t i = 0; i < plan_.persistent.size(); ++i)
    if (!external_[i] && !plan_.persistent[i].streamed)
      persistent_[i] = static_cast<char*>(*pointer) + offsets[i];
  return {};
}

Result<void> DeviceExecutor::allocate(const Graph& graph) {
  persistent_.assign(plan_.persistent.size(), nullptr);
  home_.assign(plan_.persistent.size(), nullptr);
  for (const auto& [name, pointer] : options_.external) {
    const Value* value = graph.value_by_name(name);
    const ValueStorage* storage = value != nullptr ? plan_.find(value->id) : nullptr;
    if (storage == nullptr)
      return make_error("external value '" + name + "' is not in the graph", TDM_INVALID_ARGUMENT);
    if (storage->kind != ValueStorage::Kind::Persistent || storage->owner != value->id)
      return make_error("external value '" + name +
                            "' is not a persistent value of the graph (only parameters, "
                            "state, gradients and inputs can be shared)",
                        TDM_INVALID_ARGUMENT);
    if (pointer == nullptr)
      return make_error("external value '" + name + "' is bound to a null pointer", TDM_INVALID_ARGUMENT);
    (plan_.persistent[storage->persistent].streamed ? home_ : persistent_)[storage->persistent] = pointer;
  }
  external_.assign(plan_.persistent.size(), false);
  for (size_t i = 0; i < plan_.persistent.size(); ++i) external_[i] = home_[i] != nullptr;
  if (auto r = allocate_persistent(); !r) return r;
  bool any_transient = !plan_.residencies.empty() ||
                       std::any_of(plan_.values.begin(), plan_.values.end(),
                                   [](const auto& v) { return v.second.kind == ValueStorage::Kind::Arena; });
  if (any_transient) {
    auto arena = alloc(plan_.arena_bytes, "the activation arena");
    if (!arena) return arena.error();
    held_.activations += plan_.arena_bytes;
    arena_ = *arena;
  }
  if (plan_.workspace_bytes > 0) {
    auto workspace = alloc(plan_.workspace_bytes, "the kernel workspace");
    if (!workspace) return workspace.error();
    held_.workspace += plan_.workspace_bytes;
    workspace_ = *workspace;
  }
  return allocate_streaming();
}

// One block of host memory for every streamed value this executor owns
// (pinned allocations are few and costly), each at a 64-byte boundary.
Result<void> DeviceExecutor::allocate_streaming() {
  if (plan_.estimate.streamed_home == 0 && plan_.residencies.empty()) return {};
  std::vector<size_t> offsets(plan_.persistent.size(), 0);
  size_t block = 0;
  for (size_t i = 0; i < plan_.persistent.size(); ++i) {
    if (!plan_.persistent[i].streamed || home_[i] != nullptr) continue;
    offsets[i] = block;
    block += (plan_.persistent[i].bytes + plan_.guard_bytes + 63) / 64 * 64;
  }
  if (block > 0) {
    auto homes = HostStaging::allocate(block, {device_});
    if (!homes)
      return make_error("cannot allocate " + human_bytes(block) +
                            " of host memory for the streamed parameters and state: " + homes.error().message,
                        homes.error().status);
    home_block_ = std::move(*homes);
    for (size_t i = 0; i < plan_.persistent.size(); ++i)
      if (plan_.persistent[i].streamed && home_[i] == nullptr)
        home_[i] = static_cast<char*>(home_block_.data()) + offsets[i];
  }
  std::vector<void*> homes;
  std::vector<size_t> bytes;
  std::vector<std::string> names;
  for (const Residency& r : plan_.residencies) {
    const size_t index = plan_.values.at(r.value).persistent;
    homes.push_back(home_[index]);
    bytes.push_back(plan_.persistent[index].bytes);
    names.push_back(plan_.persistent[index].name);
    for (const Touch& t : r.touches) slot_of_[{r.value, t.position}] = r.offset;
  }
  auto state = StreamedState::create(*device_, stream_.get(), plan_.residencies, std::move(homes),
                                     std::move(bytes), std::move(names), arena_);
  if (!state) return state.error();
  streamed_ = std::move(*state);
  if (options_.profile) streamed_->record_into(&profile_);
  return {};
}

void* DeviceExecutor::node_pointer(ValueId id, size_t position) const {
  const ValueStorage* storage = plan_.find(id);
  if (storage != nullptr && storage->kind == ValueStorage::Kind::Persistent &&
      plan_.persistent[storage->persistent].streamed) {
    auto slot = slot_of_.find({storage->owner, position});
    return slot == slot_of_.end() ? nullptr : static_cast<char*>(arena_) + slot->second;
  }
  return device_pointer(id);
}

void* DeviceExecutor::stream_home(ValueId value) const {
  const ValueStorage* storage = plan_.find(value);
  if (storage == nullptr || storage->kind != ValueStorage::Kind::Persistent) return nullptr;
  return home_[storage->persistent];
}

StreamStats DeviceExecutor::stream_stats() const {
  return streamed_ ? streamed_->stats() : StreamStats{};
}

void* DeviceExecutor::device_pointer(ValueId value) const {
  const ValueStorage* storage = plan_.find(value);
  if (storage == nullptr) return nullptr;
  if (storage->kind == ValueStorage::Kind::Persistent) return persistent_[storage->persistent];
  return static_cast<char*>(arena_) + storage->offset;
}

Result<void> DeviceExecutor::bind_nodes(const Graph& graph,
                                        std::vector<std::optional<KernelBinding>> kernels) {
  for (size_t i = 0; i < graph.node_count(); ++i) {
    const Node& node = *graph.node_at(i);
    const TensorType& out = graph.value(node.outputs[0])->type;
    const ops::OpInfo* info = ops::find(node.op);
    NodeRun run{node.name,
                node.layer,
                node.op,
                info != nullptr ? info->host : ops::HostKind::None,
                std::move(kernels[i]),
                tensor_bytes(out),
                out.dtype,
                {},
                {}};
    if (run.host == ops::HostKind::ZeroGather || run.host == ops::HostKind::ZeroAllGather) {
      // bytes: of the shard, as for the other zero.* ops
      run.whole_bytes = run.bytes;
      run.bytes = tensor_bytes(graph.value(node.inputs[0])->type);
    } else if (ops::data_parallel(run.host)) {
      run.whole_bytes = tensor_bytes(graph.value(node.inputs[0])->type);
    }
    for (ValueId id : node.inputs) run.inputs.push_back(id == kNoValue ? nullptr : node_pointer(id, i));
    for (ValueId id : node.outputs) run.outputs.push_back(node_pointer(id, i));
    run.reads = node.inputs;
    run.writes = node.outputs;
    run.phase = node.phase;
    if (options_.numerics.any()) guard_outputs(graph, run);
    nodes_.push_back(std::move(run));
  }
  return {};
}

void DeviceExecutor::guard_outputs(const Graph& graph, NodeRun& run) {
  if (!numerics_) numerics_.emplace(*device_, options_.numerics);
  for (size_t j = 0; j < run.writes.size(); ++j) {
    const Value& v = *graph.value(run.writes[j]);
    const ValueStorage* storage = plan_.find(v.id);
    if (storage == nullptr) continue;
    const bool in_place = std::find(run.inputs.begin(), run.inputs.end(), run.outputs[j]) != run.inputs.end();
    const ValueStorage& owner = *plan_.find(storage->owner);
    const bool external = owner.kind == ValueStorage::Kind::Persistent && external_[owner.persistent];
    run.guarded.push_back({run.outputs[j], storage->bytes, owner.arena_bytes(), v.type.dtype, v.name,
                           in_place, external ? 0 : plan_.guard_bytes});
  }
}

uint64_t DeviceExecutor::measured_peak() const {
  return device_->allocator().stats().peak;
}

}  // namespace tandem::host::exec
