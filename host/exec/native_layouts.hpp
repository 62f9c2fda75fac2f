// Which transient values live in their backend's native layout (ABI 1.3,
// tdm_backend_api.kernel_layouts).
//
// A native layout is a pure function of a tensor's (dtype, dims) on one
// backend, so the only thing to decide is *where* to use it. A value is
// native iff
//   - it is transient (an activation produced by a node, in the arena) and
//     not one of `outputs`: the host never touches its bytes. Parameters,
//     gradients, optimizer state, graph inputs and external buffers are
//     persistent and stay plain, because checkpoints, the optimizer, comm
//     and the data loader read or write them as plain row-major tensors;
//   - its producer offers native for that output slot;
//   - it has at least one consumer, and every consumer accepts native on
//     every input slot that reads it.
// One graph here runs on one device (one executor per device), so a value's
// producer and consumers always share the backend. A plugin without
// kernel_layouts (ABI <= 1.2, or NULL) answers nothing: everything plain.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "device/device.hpp"
#include "exec/kernel_binding.hpp"
#include "graph/graph.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {

// A backend's answer for one node (empty vectors: nothing native).
struct NodeLayouts {
  std::vector<uint8_t> accepts;        // per input slot
  std::vector<uint8_t> offers;         // per output slot
  std::vector<uint64_t> native_bytes;  // per output slot, where offered
};

// The answer for the node at schedule position `position`.
using LayoutQuery = std::function<NodeLayouts(size_t position, const Node& node)>;

struct LayoutPlan {
  std::map<ValueId, uint64_t> native;  // native values -> their native byte size

  bool is_native(ValueId id) const { return native.count(id) > 0; }
  // tdm_op_desc.layouts for `node`: inputs then outputs; empty when all plain.
  std::vector<uint8_t> node_layouts(const Node& node) const;
};

// The rule above, on any answers (tests pass their own).
LayoutPlan decide_layouts(const Graph& graph, const std::set<ValueId>& outputs, const LayoutQuery& query);

// The rule above, asking `device`'s backend. Never fails on the backend's
// behalf: a node whose question fails is simply all plain (its prepare will
// report the real problem).
LayoutPlan decide_layouts(const DeviceHandle& device, const Graph& graph, const std::set<ValueId>& outputs);

}  // namespace tandem::host::exec
