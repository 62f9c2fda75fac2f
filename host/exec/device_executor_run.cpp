// A DeviceExecutor's nodes launched in schedule order on its stream: kernel
// launches (between the numerics guard's poison and check), the host-run
// "comm.*" nodes of tensor parallelism (ZeRO's "zero.*" ones, and the
// exchanges that run meanwhile, are in device_executor_zero.cpp), and the
// per-node timing of a profiled run.
#include <chrono>
#include <string>

#include "exec/device_executor.hpp"
#include "exec/tensor_text.hpp"
#include "plugin/optional_call.hpp"
#include "plugin/plugin_call.hpp"
#include "util/last_error.hpp"

namespace tandem::host::exec {
namespace {

double micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace

std::string DeviceExecutor::node_text(size_t position) const {
  const NodeRun& node = nodes_[position];
  std::string text = "node '" + node.name + "' (";
  if (!node.layer.empty()) text += "layer '" + node.layer + "', ";
  return text + node.op + ")";
}

Executor::NodeKernel DeviceExecutor::node_kernel(size_t position) const {
  if (position >= nodes_.size()) return {};
  const NodeRun& node = nodes_[position];
  return {device_->id(), node.kernel ? node.kernel->describe() : std::string()};
}

Result<void> DeviceExecutor::communicate(size_t position) {
  NodeRun& node = nodes_[position];
  if (ops::data_parallel(node.host)) {
    auto shared = share(position);
    if (!shared)
      return make_error(node_text(position) + ": " + shared.error().message, shared.error().status);
    return {};
  }
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

Result<void> DeviceExecutor::launch(size_t position) {
  NodeRun& node = nodes_[position];
  if (!node.kernel) {
    auto done = communicate(position);
    if (!done || !numerics_) return done;
    return numerics_->check(stream_.get(), node.guarded, node_text(position), node.phase);
  }
  if (numerics_)
    if (auto r = numerics_->poison(stream_.get(), node.guarded); !r) return r;
  clear_last_error();
  tdm_status status = call_plugin(device_->backend(), "kernel_launch", [&] {
    return api().kernel_launch(node.kernel->get(), stream_.get(), node.inputs.data(), node.outputs.data(),
                               workspace_);
  });
  if (status != TDM_OK)
    return plugin_failure(node_text(position) + " failed on " + device_->id() + ": " + plugin_reason(status),
                          status);
  if (numerics_) return numerics_->check(stream_.get(), node.guarded, node_text(position), node.phase);
  return {};
}

Result<void> DeviceExecutor::run(size_t first, size_t end) {
  if (auto launched = launch_range(first, end); !launched) return launched;
  return synchronize();
}

Result<void> DeviceExecutor::launch_range(size_t first, size_t end) {
  if (first > end || end > nodes_.size())
    return make_error("run [" + std::to_string(first) + ", " + std::to_string(end) +
                          ") is outside the schedule of " + std::to_string(nodes_.size()) + " nodes",
                      TDM_INVALID_ARGUMENT);
  // ZeRO's exchanges and streamed values' copies the range issued are
  // complete when it returns, an error or not (the next range may reuse
  // their buffers).
  Result<void> launched;
  if (!streamed_) {
    for (size_t i = first; i < end && launched; ++i) launched = launch_timed(i);
    Result<void> drained = drain_exchanges();
    return launched ? drained : launched;
  }
  if (auto r = streamed_->begin(first, end); !r) return r;
  for (size_t i = first; i < end && launched; ++i) {
    launched = streamed_->before(i);  // waiting for a copy is not the node's time
    if (launched) launched = launch_timed(i);
    if (launched) launched = streamed_->after(i);
  }
  Result<void> drained = drain_exchanges();
  Result<void> finished = streamed_->finish();
  if (!launched) return launched;
  return drained ? finished : drained;
}

// A profiled run synchronises after each node and records its wall time.
Result<void> DeviceExecutor::launch_timed(size_t i) {
  auto start = std::chrono::steady_clock::now();
  if (auto launched = launch(i); !launched) return launched;
  if (!options_.profile) return {};
  clear_last_error();
  tdm_status status = api().stream_synchronize(stream_.get());
  if (status != TDM_OK)
    return make_error(node_text(i) + " failed on " + device_->id() + ": " + plugin_reason(status), status);
  auto stop = std::chrono::steady_clock::now();
  profile_.time_us[i] += micros(stop - start);
  profile_.events.push_back({i, micros(start - profile_.epoch), micros(stop - start)});
  return {};
}

Result<void> DeviceExecutor::synchronize() {
  clear_last_error();
  tdm_status status = api().stream_synchronize(stream_.get());
  if (status != TDM_OK)
    return make_error("work on " + device_->id() + " failed: " + plugin_reason(status), status);
  return {};
}

}  // namespace tandem::host::exec
