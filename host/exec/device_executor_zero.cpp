// A DeviceExecutor's "zero.*" nodes: ZeRO's exchanges between the
// data-parallel peers that share the optimizer's state (host/ops/host_run.cpp
// says what each computes). Rank r's shard of a tensor of n elements is its
// elements [r*s, r*s + s); where world * s > n the collectives work on a
// padded copy in the node's workspace (planned with the others, so it costs
// no memory the plan does not show).
//
// An exchange a zero.wait follows (lowering/zero_overlap.hpp) runs while the
// nodes between them compute, its padded copy in the one exchange buffer:
//   - where the comm plugin gets a native stream (a GPU), on a stream of its
//     own that waits for an event of the compute stream, which the wait
//     makes wait for the exchange's "done" event: the host never blocks;
//   - otherwise on a host thread, once the compute stream has finished the
//     inputs; the wait blocks until the thread has run it.
// Either way the exchanges run one at a time in launch order, the same on
// every rank, and every one has ended before an exchange that runs in place
// and at the end of each run.
#include <algorithm>
#include <string>
#include <vector>

#include "exec/device_executor.hpp"
#include "exec/planner.hpp"
#include "exec/tensor_text.hpp"
#include "ops/shapes.hpp"
#include "plugin/optional_call.hpp"
#include "util/last_error.hpp"

namespace tandem::host::exec {
namespace {

void* native_handle(const DeviceHandle& device, tdm_stream* stream) {
  auto native = TANDEM_OPTIONAL_FN(device.backend(), backend, tdm_backend_api, stream_native_handle, 1);
  return native != nullptr ? native(stream) : nullptr;
}

Result<void> called(tdm_status status, const char* what, const DeviceHandle& device) {
  if (status != TDM_OK)
    return make_error(std::string(what) + " on " + device.id() + " failed: " + plugin_reason(status), status);
  return {};
}

}  // namespace

Result<void> DeviceExecutor::prepare_exchanges(const Graph& graph, size_t staging_bytes) {
  size_t padding = 0;
  bool any = false;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    NodeRun& run = nodes_[i];
    if (ops::data_parallel(run.host)) padding = std::max(padding, run.bytes);
    const Node& node = *graph.node_at(i);
    if (run.host == ops::HostKind::ZeroWait) {
      run.exchange = *graph.position(graph.value(node.inputs[0])->producer);
      continue;
    }
    if (!overlapped_exchange(graph, node)) continue;
    any = run.staged_exchange = true;
    const ValueStorage* read = plan_.find(node.inputs[0]);
    run.in_flight =
        !(read->kind == ValueStorage::Kind::Persistent && plan_.persistent[read->persistent].streamed);
    if (run.in_flight) run.guarded.clear();  // its output is checked at the wait
  }
  zero_padding_.assign(padding, 0);
  if (!any) return {};
  exchanges_ = std::make_unique<Exchanges>();
  Exchanges& x = *exchanges_;
  x.on_streams = options_.exchanges_on_streams || native_handle(*device_, stream_.get()) != nullptr;
  auto stream = OwnedStream::create(*device_, "ZeRO exchange");
  if (!stream) return stream.error();
  x.stream = std::move(*stream);
  if (staging_bytes > 0) {
    auto staging = alloc(staging_bytes, "ZeRO's exchange buffer");
    if (!staging) return staging.error();
    held_.buffers += staging_bytes;
    x.staging = *staging;
  }
  if (!x.on_streams) {
    x.worker.emplace();
    return {};
  }
  auto ready = OwnedEvent::create(*device_);
  if (!ready) return ready.error();
  x.ready = std::move(*ready);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].in_flight) continue;
    auto done = OwnedEvent::create(*device_);
    if (!done) return done.error();
    x.done.emplace(i, std::move(*done));
  }
  return {};
}

Result<void> DeviceExecutor::share(size_t position) {
  NodeRun& node = nodes_[position];
  if (node.host == ops::HostKind::ZeroWait) return wait_exchange(position);
  if (node.in_flight) return launch_exchange(position);
  if (auto r = drain_exchanges(); !r) return r;  // its collectives come after theirs
  if (auto r = synchronize(); !r) return r;      // the inputs are complete
  void* scratch = node.staged_exchange ? exchanges_->staging : workspace_;
  if (auto r = exchange(position, stream_.get(), native_handle(*device_, stream_.get()), scratch); !r)
    return r;
  return synchronize();
}

Result<void> DeviceExecutor::launch_exchange(size_t position) {
  Exchanges& x = *exchanges_;
  if (!x.on_streams) {
    if (auto r = synchronize(); !r) return r;  // the inputs are complete
    x.tickets[position] = x.worker->post([this, position] {
      Exchanges& on = *exchanges_;
      auto r = exchange(position, on.stream.get(), nullptr, on.staging);
      if (r) r = called(api().stream_synchronize(on.stream.get()), "an exchange's copies", *device_);
      return r;
    });
    return {};
  }
  clear_last_error();
  if (auto r = called(api().event_record(x.ready.get(), stream_.get()), "recording an event", *device_); !r)
    return r;
  if (auto r =
          called(api().stream_wait_event(x.stream.get(), x.ready.get()), "waiting for an event", *device_);
      !r)
    return r;
  if (auto r = exchange(position, x.stream.get(), native_handle(*device_, x.stream.get()), x.staging); !r)
    return r;
  x.pending.insert(position);
  return called(api().event_record(x.done.at(position).get(), x.stream.get()), "recording an event",
                *device_);
}

Result<void> DeviceExecutor::wait_exchange(size_t position) {
  const NodeRun& node = nodes_[position];
  if (exchanges_ != nullptr) {
    Exchanges& x = *exchanges_;
    if (x.pending.erase(node.exchange) > 0) {
      clear_last_error();
      if (auto r = called(api().stream_wait_event(stream_.get(), x.done.at(node.exchange).get()),
                          "waiting for an exchange", *device_);
          !r)
        return r;
    }
    if (auto ticket = x.tickets.find(node.exchange); ticket != x.tickets.end()) {
      auto r = x.worker->wait(ticket->second);
      x.tickets.erase(ticket);
      if (!r) return r;
    }
  }
  if (node.outputs[0] == node.inputs[0]) return {};
  clear_last_error();
  return called(api().copy_d2d(stream_.get(), node.outputs[0], node.inputs[0], node.bytes), "copy", *device_);
}

Result<void> DeviceExecutor::drain_exchanges() {
  if (exchanges_ == nullptr) return {};
  Exchanges& x = *exchanges_;
  Result<void> first;
  for (auto& [at, ticket] : x.tickets) {
    auto r = x.worker->wait(ticket);
    if (!r && first) first = r;
  }
  x.tickets.clear();
  if (!x.pending.empty()) {
    x.pending.clear();
    clear_last_error();
    auto r = called(api().stream_synchronize(x.stream.get()), "an exchange", *device_);
    if (!r && first) first = r;
  }
  return first;
}

Result<void> DeviceExecutor::exchange(size_t position, tdm_stream* stream, void* native,
                                      void* scratch) const {
  const NodeRun& node = nodes_[position];
  Collectives& c = *options_.data_collectives;
  auto copy = [&](void* dst, const void* src, size_t bytes) -> Result<void> {
    if (bytes == 0) return {};
    clear_last_error();
    return called(api().copy_d2d(stream, dst, src, bytes), "copy", *device_);
  };
  auto zero = [&](void* dst, size_t bytes) -> Result<void> {
    if (bytes == 0) return {};
    clear_last_error();
    return called(api().copy_h2d(stream, dst, zero_padding_.data(), bytes), "fill", *device_);
  };
  // A host collective reads and writes the buffers when called.
  auto complete = [&]() -> Result<void> {
    if (native != nullptr) return {};
    clear_last_error();
    return called(api().stream_synchronize(stream), "copy", *device_);
  };
  const size_t shard = node.bytes, whole = node.whole_bytes;
  const size_t padded = shard * static_cast<size_t>(c.world());
  const size_t element = dtype_size(node.dtype);
  switch (node.host) {
    case ops::HostKind::ZeroShard: {
      const auto mine = ops::zero_shard_range(static_cast<int64_t>(whole / element), c.world(), c.rank());
      const size_t begin = static_cast<size_t>(mine.begin) * element;
      const size_t taken = static_cast<size_t>(mine.count) * element;
      auto r = copy(node.outputs[0], static_cast<const char*>(node.inputs[0]) + begin, taken);
      if (r) r = zero(static_cast<char*>(node.outputs[0]) + taken, shard - taken);
      return r;
    }
    case ops::HostKind::ZeroReduceScatter: {
      const void* send = node.inputs[0];
      if (padded != whole) {
        auto r = copy(scratch, send, whole);
        if (r) r = zero(static_cast<char*>(scratch) + whole, padded - whole);
        if (!r) return r;
        send = scratch;
      }
      if (auto r = complete(); !r) return r;
      return c.reduce_scatter_mean(send, node.outputs[0], shard / element, node.dtype, native);
    }
    case ops::HostKind::ZeroGather:
    case ops::HostKind::ZeroAllGather: {
      // zero.gather: in place, outputs[0] is the whole tensor (input 1).
      void* receive = padded == whole ? node.outputs[0] : scratch;
      if (auto r = complete(); !r) return r;
      if (auto r = c.all_gather(node.inputs[0], receive, shard / element, node.dtype, native); !r) return r;
      if (receive == node.outputs[0]) return {};
      return copy(node.outputs[0], receive, whole);
    }
    case ops::HostKind::ZeroAllReduce: {
      auto r = copy(node.outputs[0], node.inputs[0], node.bytes);
      if (r) r = complete();
      if (r) r = c.all_reduce_sum(node.outputs[0], node.bytes / element, node.dtype, native);
      return r;
    }
    default:
      return make_error(node_text(position) + ": not a ZeRO op", TDM_INVALID_ARGUMENT);
  }
}

}  // namespace tandem::host::exec
