// A DeviceExecutor's "zero.*" nodes: ZeRO's exchanges between the
// data-parallel peers that share the optimizer's state (host/ops/host_run.cpp
// says what each computes). Rank r's shard of a tensor of n elements is its
// elements [r*s, r*s + s); where world * s > n the collectives work on a
// padded copy in the node's workspace (planned with the others, so it costs
// no memory the plan does not show).
#include <algorithm>
#include <string>
#include <vector>

#include "exec/device_executor.hpp"
#include "exec/tensor_text.hpp"
#include "plugin/optional_call.hpp"
#include "util/last_error.hpp"

namespace tandem::host::exec {

Result<void> DeviceExecutor::share(size_t position) {
  NodeRun& node = nodes_[position];
  Collectives& c = *options_.data_collectives;
  auto native = TANDEM_OPTIONAL_FN(device_->backend(), backend, tdm_backend_api, stream_native_handle, 1);
  void* stream = native != nullptr ? native(stream_.get()) : nullptr;
  auto check = [&](tdm_status status, const char* what) -> Result<void> {
    if (status != TDM_OK)
      return make_error(std::string(what) + " on " + device_->id() + " failed: " + plugin_reason(status),
                        status);
    return {};
  };
  auto copy = [&](void* dst, const void* src, size_t bytes) {
    clear_last_error();
    return check(bytes == 0 ? TDM_OK : api().copy_d2d(stream_.get(), dst, src, bytes), "copy");
  };
  auto zero = [&](void* dst, size_t bytes) {
    const std::vector<char> zeros(bytes, 0);
    clear_last_error();
    auto r = check(bytes == 0 ? TDM_OK : api().copy_h2d(stream_.get(), dst, zeros.data(), bytes), "fill");
    if (!r) return r;
    return synchronize();  // before `zeros` goes
  };
  const size_t shard = node.bytes, whole = node.whole_bytes;
  const size_t padded = shard * static_cast<size_t>(c.world());
  const size_t element = dtype_size(node.dtype);
  switch (node.host) {
    case ops::HostKind::ZeroShard: {
      const size_t begin = std::min(whole, shard * static_cast<size_t>(c.rank()));
      const size_t taken = std::min(shard, whole - begin);
      auto r = copy(node.outputs[0], static_cast<const char*>(node.inputs[0]) + begin, taken);
      if (r) r = zero(static_cast<char*>(node.outputs[0]) + taken, shard - taken);
      return r;
    }
    case ops::HostKind::ZeroReduceScatter: {
      const void* send = node.inputs[0];
      if (padded != whole) {
        auto r = copy(workspace_, send, whole);
        if (r) r = zero(static_cast<char*>(workspace_) + whole, padded - whole);
        if (!r) return r;
        send = workspace_;
      }
      if (auto r = synchronize(); !r) return r;
      return c.reduce_scatter_mean(send, node.outputs[0], shard / element, node.dtype, stream);
    }
    case ops::HostKind::ZeroGather:
    case ops::HostKind::ZeroAllGather: {
      // zero.gather: in place, outputs[0] is the whole tensor (input 1).
      void* receive = padded == whole ? node.outputs[0] : workspace_;
      if (auto r = c.all_gather(node.inputs[0], receive, shard / element, node.dtype, stream); !r) return r;
      if (receive == node.outputs[0]) return {};
      if (auto r = synchronize(); !r) return r;
      return copy(node.outputs[0], receive, whole);
    }
    case ops::HostKind::ZeroAllReduce: {
      auto r = copy(node.outputs[0], node.inputs[0], node.bytes);
      if (r) r = synchronize();
      if (r) r = c.all_reduce_sum(node.outputs[0], node.bytes / element, node.dtype, stream);
      return r;
    }
    default:
      return make_error(node_text(position) + ": not a ZeRO op", TDM_INVALID_ARGUMENT);
  }
}

}  // namespace tandem::host::exec
