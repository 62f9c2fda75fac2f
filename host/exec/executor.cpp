#include "exec/executor.hpp"

#include <algorithm>
#include <utility>

#include "exec/device_objects.hpp"
#include "exec/native_layouts.hpp"
#include "exec/tensor_text.hpp"
#include "ops/op_table.hpp"
#include "plugin/optional_call.hpp"
#include "util/format.hpp"
#include "util/last_error.hpp"

namespace tandem::host::exec {
namespace {

double micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace

Executor::Buffer::Buffer(Buffer&& other) noexcept
    : device(other.device), pointer(std::exchange(other.pointer, nullptr)) {}

Executor::Buffer::~Buffer() {
  if (pointer != nullptr) device->allocator().free(pointer);
}

void Executor::StreamDeleter::operator()(tdm_stream* stream) const noexcept {
  if (stream != nullptr) api->stream_destroy(stream);
}

Executor::Executor(const DeviceHandle& device, ExecutorOptions options)
    : device_(&device),
      options_(std::move(options)),
      stream_(nullptr, StreamDeleter{device.backend().backend}),
      epoch_(std::chrono::steady_clock::now()) {}

Executor::~Executor() {
  // Copies in flight read and write the parts' buffers and the spare input
  // buffers: they finish first. Nothing may be released while a stream
  // still uses it.
  copies_.reset();
  staged_.reset();
  if (stream_) (void)api().stream_synchronize(stream_.get());
}

namespace {

// A plan over the device's budget is refused before anything is allocated.
Result<void> check_budget(const DeviceHandle& device, const MemoryEstimate& e, uint64_t budget) {
  if (budget == 0 || e.total <= budget) return {};
  return make_error(
      device.id() + " needs " + human_bytes(e.total) + " (parameters " + human_bytes(e.parameters) +
          ", gradients " + human_bytes(e.gradients) + ", optimizer state " + human_bytes(e.optimizer_state) +
          ", activations " + human_bytes(e.activations) + ", workspace " + human_bytes(e.workspace) +
          ", other " + human_bytes(e.other_state + e.inputs + e.allocator_rounding) +
          ") but its memory budget is " + human_bytes(budget) + ": over by " + human_bytes(e.total - budget),
      TDM_OUT_OF_MEMORY);
}

}  // namespace

Result<std::unique_ptr<Executor>> Executor::create(const DeviceHandle& device, const Graph& graph,
                                                   ExecutorOptions options) {
  std::unique_ptr<Executor> executor(new Executor(device, std::move(options)));
  std::set<ValueId> outputs;
  for (const std::string& name : executor->options_.outputs) {
    const Value* v = graph.value_by_name(name);
    if (v == nullptr)
      return make_error("output value '" + name + "' is not in the graph", TDM_INVALID_ARGUMENT);
    outputs.insert(v->id);
  }
  // Layouts are decided before prepare: a kernel is built for them (ABI 1.3).
  const LayoutPlan layouts = decide_layouts(device, graph, outputs);
  std::vector<std::optional<KernelBinding>> kernels;
  std::vector<size_t> workspace;
  for (size_t i = 0; i < graph.node_count(); ++i) {
    const Node& node = *graph.node_at(i);
    if (ops::is(node.op, ops::kCollective)) {
      if (executor->options_.collectives == nullptr)
        return make_error("node '" + node.name + "' (layer '" + node.layer + "', " + node.op +
                              ") exchanges data with the other ranks of a tensor-parallel run, but this run "
                              "has none: launch it with mpirun, or remove `parallel` from the layer",
                          TDM_INVALID_ARGUMENT);
      workspace.push_back(0);
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
  auto plan = make_plan(graph, workspace, outputs, layouts.native);
  if (!plan) return plan.error();
  executor->plan_ = std::move(plan.value());
  if (auto r = check_budget(device, executor->plan_.estimate, executor->options_.memory_budget); !r)
    return r.error();

  tdm_stream* stream = nullptr;
  clear_last_error();
  tdm_status status = device.backend().backend->stream_create(device.get(), &stream);
  if (status != TDM_OK || stream == nullptr)
    return make_error("cannot create a stream on " + device.id() + ": " + plugin_reason(status),
                      status != TDM_OK ? status : TDM_INTERNAL);
  executor->stream_.reset(stream);

  if (auto allocated = executor->allocate(graph); !allocated) return allocated.error();
  if (auto bound = executor->bind_nodes(graph, std::move(kernels)); !bound) return bound.error();
  executor->node_time_us_.assign(executor->nodes_.size(), 0.0);
  return executor;
}

Result<void*> Executor::alloc(size_t bytes, const std::string& what) {
  auto pointer = device_->allocator().allocate(bytes, what);
  if (!pointer) return pointer.error();
  buffers_.emplace_back(*device_, *pointer);
  allocated_ += bytes;
  return pointer;
}

Result<void> Executor::allocate(const Graph& graph) {
  persistent_.assign(plan_.persistent.size(), nullptr);
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
    persistent_[storage->persistent] = pointer;
  }
  for (size_t i = 0; i < plan_.persistent.size(); ++i) {
    if (persistent_[i] != nullptr) continue;
    auto pointer = alloc(plan_.persistent[i].bytes, "'" + plan_.persistent[i].name + "'");
    if (!pointer) return pointer.error();
    persistent_[i] = *pointer;
  }
  bool any_transient = std::any_of(plan_.values.begin(), plan_.values.end(),
                                   [](const auto& v) { return v.second.kind == ValueStorage::Kind::Arena; });
  if (any_transient) {
    auto arena = alloc(plan_.arena_bytes, "the activation arena");
    if (!arena) return arena.error();
    arena_ = *arena;
  }
  if (plan_.workspace_bytes > 0) {
    auto workspace = alloc(plan_.workspace_bytes, "the kernel workspace");
    if (!workspace) return workspace.error();
    workspace_ = *workspace;
  }
  return {};
}

void* Executor::device_pointer(ValueId value) const {
  if (!parts_.empty()) {
    auto owner = owner_of(value);
    return owner ? owner->first->device_pointer(owner->second) : nullptr;
  }
  const ValueStorage* storage = plan_.find(value);
  if (storage == nullptr) return nullptr;
  if (storage->kind == ValueStorage::Kind::Persistent) return persistent_[storage->persistent];
  return static_cast<char*>(arena_) + storage->offset;
}

Result<void> Executor::bind_nodes(const Graph& graph, std::vector<std::optional<KernelBinding>> kernels) {
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
    for (ValueId id : node.inputs) run.inputs.push_back(id == kNoValue ? nullptr : device_pointer(id));
    for (ValueId id : node.outputs) run.outputs.push_back(device_pointer(id));
    run.reads = node.inputs;
    run.writes = node.outputs;
    run.phase = node.phase;
    if (options_.numerics.any()) guard_outputs(graph, run);
    nodes_.push_back(std::move(run));
  }
  return {};
}

void Executor::guard_outputs(const Graph& graph, NodeRun& run) {
  if (!numerics_) numerics_.emplace(*device_, options_.numerics);
  for (size_t j = 0; j < run.writes.size(); ++j) {
    const Value& v = *graph.value(run.writes[j]);
    const ValueStorage* storage = plan_.find(v.id);
    if (!is_floating(v.type.dtype) || storage == nullptr) continue;
    const bool in_place = std::find(run.inputs.begin(), run.inputs.end(), run.outputs[j]) != run.inputs.end();
    run.guarded.push_back({run.outputs[j], storage->bytes, v.type.dtype, v.name, in_place});
  }
}

std::string Executor::node_text(size_t position) const {
  const NodeRun& node = nodes_[position];
  std::string text = "node '" + node.name + "' (";
  if (!node.layer.empty()) text += "layer '" + node.layer + "', ";
  return text + node.op + ")";
}

Result<void> Executor::communicate(size_t position) {
  NodeRun& node = nodes_[position];
  if (auto r = synchronize(); !r) return r;  // the inputs are complete
  Collectives& c = *options_.collectives;
  auto native = TANDEM_OPTIONAL_FN(device_->backend(), backend, tdm_backend_api, stream_native_handle, 1);
  void* stream = native != nullptr ? native(stream_.get()) : nullptr;
  auto copy = [&](void* dst, const void* src, size_t bytes) -> Result<void> {
    clear_last_error();
    const tdm_status status = api().copy_d2d(stream_.get(), dst, src, bytes);
    if (status != TDM_OK)
      return make_error("copy on " + device_->id() + " failed: " + plugin_reason(status), status);
    return synchronize();
  };
  Result<void> r;
  const tdm_dtype dtype = node.dtype;
  const size_t count = node.bytes / dtype_size(dtype);
  switch (node.host) {
    case ops::HostKind::AllReduce:
      r = copy(node.outputs[0], node.inputs[0], node.bytes);
      if (r) r = c.all_reduce_sum(node.outputs[0], count, dtype, stream);
      break;
    case ops::HostKind::CopyToParallel:
      r = copy(node.outputs[0], node.inputs[0], node.bytes);
      break;
    case ops::HostKind::AllGather:
      r = c.all_gather(node.inputs[0], node.outputs[0], count / static_cast<size_t>(c.world()), dtype,
                       stream);
      break;
    case ops::HostKind::Chunk:
      r = copy(node.outputs[0],
               static_cast<const char*>(node.inputs[0]) + node.bytes * static_cast<size_t>(c.rank()),
               node.bytes);
      break;
    default:
      return make_error(node_text(position) + ": not a communication op", TDM_INVALID_ARGUMENT);
  }
  if (!r) return make_error(node_text(position) + ": " + r.error().message, r.error().status);
  return synchronize();
}

Result<void> Executor::launch(size_t position) {
  NodeRun& node = nodes_[position];
  if (!node.kernel) {
    auto done = communicate(position);
    if (!done || !numerics_) return done;
    return numerics_->check(stream_.get(), node.guarded, node_text(position), node.phase);
  }
  if (numerics_)
    if (auto r = numerics_->poison(stream_.get(), node.guarded); !r) return r;
  clear_last_error();
  tdm_status status = api().kernel_launch(node.kernel->get(), stream_.get(), node.inputs.data(),
                                          node.outputs.data(), workspace_);
  if (status != TDM_OK)
    return make_error(node_text(position) + " failed on " + device_->id() + ": " + plugin_reason(status),
                      status);
  if (numerics_) return numerics_->check(stream_.get(), node.guarded, node_text(position), node.phase);
  return {};
}

Result<void> Executor::run(size_t first, size_t end) {
  if (!parts_.empty()) return run_parts(first, end);
  if (first > end || end > nodes_.size())
    return make_error("run [" + std::to_string(first) + ", " + std::to_string(end) +
                          ") is outside the schedule of " + std::to_string(nodes_.size()) + " nodes",
                      TDM_INVALID_ARGUMENT);
  if (auto launched = launch_range(first, end); !launched) return launched;
  return synchronize();
}

Result<void> Executor::launch_range(size_t first, size_t end) {
  for (size_t i = first; i < end; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (auto launched = launch(i); !launched) return launched;
    if (!options_.profile) continue;
    clear_last_error();
    tdm_status status = api().stream_synchronize(stream_.get());
    if (status != TDM_OK)
      return make_error(node_text(i) + " failed on " + device_->id() + ": " + plugin_reason(status), status);
    auto stop = std::chrono::steady_clock::now();
    node_time_us_[i] += micros(stop - start);
    events_.push_back({i, micros(start - epoch_), micros(stop - start)});
  }
  return {};
}

Result<void> Executor::synchronize() {
  if (!parts_.empty()) return finish_parts();
  clear_last_error();
  tdm_status status = api().stream_synchronize(stream_.get());
  if (status != TDM_OK)
    return make_error("work on " + device_->id() + " failed: " + plugin_reason(status), status);
  return {};
}

Result<const ValueStorage*> Executor::checked(ValueId value, size_t bytes, const char* action) const {
  const ValueStorage* storage = plan_.find(value);
  if (storage == nullptr)
    return make_error(
        std::string("cannot ") + action + " value " + std::to_string(value) + ": not in the plan",
        TDM_INVALID_ARGUMENT);
  if (storage->native)
    return make_error(std::string("cannot ") + action + " value " + std::to_string(value) +
                          ": it is in the backend's native layout, private to its kernels; list it in "
                          "ExecutorOptions::outputs to keep it plain",
                      TDM_INVALID_ARGUMENT);
  if (bytes != storage->bytes)
    return make_error(std::string("cannot ") + action + " value " + std::to_string(value) + ": " +
                          std::to_string(bytes) + " bytes given, it holds " + std::to_string(storage->bytes),
                      TDM_INVALID_ARGUMENT);
  return storage;
}

Result<void> Executor::write(ValueId value, const void* host, size_t bytes) {
  if (!parts_.empty()) {
    auto owner = owner_of(value);
    if (!owner) return owner.error();
    return owner->first->write(owner->second, host, bytes);
  }
  auto storage = checked(value, bytes, "write");
  if (!storage) return storage.error();
  if (staged_) staged_->discard(value);
  clear_last_error();
  tdm_status status = api().copy_h2d(stream_.get(), device_pointer(value), host, bytes);
  if (status != TDM_OK)
    return make_error("copy to " + device_->id() + " failed: " + plugin_reason(status), status);
  return synchronize();
}

Result<void> Executor::read(ValueId value, void* host, size_t bytes) {
  if (!parts_.empty()) {
    auto owner = owner_of(value);
    if (!owner) return owner.error();
    return owner->first->read(owner->second, host, bytes);
  }
  auto storage = checked(value, bytes, "read");
  if (!storage) return storage.error();
  clear_last_error();
  tdm_status status = api().copy_d2h(stream_.get(), host, device_pointer(value), bytes);
  if (status != TDM_OK)
    return make_error("copy from " + device_->id() + " failed: " + plugin_reason(status), status);
  return synchronize();
}

Result<void> Executor::fill(ValueId value, double number) {
  if (!parts_.empty()) {
    auto owner = owner_of(value);
    if (!owner) return owner.error();
    return owner->first->fill(owner->second, number);
  }
  const ValueStorage* storage = plan_.find(value);
  if (storage == nullptr)
    return make_error("cannot fill value " + std::to_string(value) + ": not in the plan",
                      TDM_INVALID_ARGUMENT);
  if (storage->native)  // the fill kernel writes plain bytes
    return make_error("cannot fill value " + std::to_string(value) + ": it is in the backend's native layout",
                      TDM_INVALID_ARGUMENT);
  OpSpec spec;
  spec.op = "fill";
  spec.node_name = "fill." + std::to_string(value);
  spec.attrs.push_back({"value", number});
  spec.outputs.push_back(storage->type);
  auto kernel = KernelBinding::prepare(*device_, spec);
  if (!kernel) return kernel.error();
  void* workspace = workspace_;
  if (kernel->workspace_bytes() > plan_.workspace_bytes) {
    auto extra = alloc(kernel->workspace_bytes(), "the fill workspace");
    if (!extra) return extra.error();
    workspace = *extra;
  }
  void* outputs[1] = {device_pointer(value)};
  clear_last_error();
  tdm_status status = api().kernel_launch(kernel->get(), stream_.get(), nullptr, outputs, workspace);
  if (status != TDM_OK)
    return make_error("fill of value " + std::to_string(value) + " failed on " + device_->id() + ": " +
                          plugin_reason(status),
                      status);
  return synchronize();  // before the kernel is released
}

Result<void> Executor::allow_staging(ValueId value) {
  if (!parts_.empty()) {
    auto owner = owner_of(value);
    if (!owner) return owner.error();
    return owner->first->allow_staging(owner->second);
  }
  if (staged_ && staged_->contains(value)) return {};
  const ValueStorage* storage = plan_.find(value);
  if (storage != nullptr && storage->kind == ValueStorage::Kind::Persistent) {
    const std::string& name = plan_.persistent[storage->persistent].name;
    if (options_.external.count(name) > 0)
      return make_error("cannot stage '" + name + "': its buffer belongs to another executor (external)",
                        TDM_INVALID_ARGUMENT);
  }
  Plan planned = plan_;
  if (auto r = plan_staged_input(planned, value); !r) return r;
  if (auto r = check_budget(*device_, planned.estimate, options_.memory_budget); !r) return r;
  if (!staged_) {
    auto created = StagedInputs::create(*device_);
    if (!created) return created.error();
    staged_.emplace(std::move(*created));
  }
  const PersistentBuffer& buffer = planned.persistent[storage->persistent];
  auto spare = alloc(buffer.bytes, "the second buffer of '" + buffer.name + "' (staged input)");
  if (!spare) return spare.error();
  plan_ = std::move(planned);
  // Every place that holds the value's address; arena values never share a
  // persistent value's address, so equal pointers are exactly its readers
  // and in-place writers.
  void* current = persistent_[storage->persistent];
  std::vector<void**> references = {&persistent_[storage->persistent]};
  for (NodeRun& node : nodes_) {
    for (void*& pointer : node.inputs)
      if (pointer == current) references.push_back(&pointer);
    for (void*& pointer : node.outputs)
      if (pointer == current) references.push_back(&pointer);
  }
  staged_->add(value, buffer.name, buffer.bytes, *spare, std::move(references));
  return {};
}

Result<void> Executor::stage(ValueId value, const void* host, size_t bytes) {
  if (!parts_.empty()) {
    auto owner = owner_of(value);
    if (!owner) return owner.error();
    return owner->first->stage(owner->second, host, bytes);
  }
  auto storage = checked(value, bytes, "stage");
  if (!storage) return storage.error();
  if (!staged_ || !staged_->contains(value)) {
    const bool named = (*storage)->kind == ValueStorage::Kind::Persistent;
    return make_error(
        "cannot stage " +
            (named ? "'" + plan_.persistent[(*storage)->persistent].name + "'"
                   : "value " + std::to_string(value)) +
            ": it has no second buffer; call allow_staging for it first (only inputs can be staged)",
        TDM_INVALID_ARGUMENT);
  }
  return staged_->stage(value, host, bytes);
}

Result<void> Executor::use_staged() {
  for (ExecutorPart& part : parts_)
    if (auto r = part.executor->use_staged(); !r) return r;
  if (!parts_.empty() || !staged_) return {};
  return staged_->use(stream_.get());
}

uint64_t Executor::measured_peak() const {
  if (!parts_.empty()) {
    uint64_t total = 0;  // one device each
    for (const ExecutorPart& part : parts_) total += part.executor->measured_peak();
    return total;
  }
  return device_->allocator().stats().peak;
}

void Executor::clear_profile() {
  for (ExecutorPart& part : parts_) part.executor->clear_profile();
  std::fill(events_taken_.begin(), events_taken_.end(), 0);
  std::fill(node_time_us_.begin(), node_time_us_.end(), 0.0);
  events_.clear();
}

}  // namespace tandem::host::exec
