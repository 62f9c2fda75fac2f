#include "lowering/zero_overlap.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ops/op_table.hpp"

namespace tandem::host::lowering {
namespace {

// A layer's weight and bias gradients are finished by one node: both are
// in flight while the layer below runs backward.
constexpr size_t kReduceScattersInFlight = 2;

struct Exchange {
  NodeId node = kNoNode;
  bool gather = false;
};

// The reduce-scatters and gathers of forward and backward, in schedule order.
std::vector<Exchange> exchanges(const Graph& g) {
  std::vector<Exchange> found;
  for (size_t i = 0; i < g.node_count(); ++i) {
    const Node& n = *g.node_at(i);
    const ops::HostKind kind = ops::host_kind(n.op);
    if (n.phase != TDM_PHASE_OPTIMIZER &&
        (kind == ops::HostKind::ZeroReduceScatter || kind == ops::HostKind::ZeroAllGather))
      found.push_back({n.id, kind == ops::HostKind::ZeroAllGather});
  }
  return found;
}

// Where the wait of `exchange` goes: before the first later node that reads
// its result, starts the optimizer phase, runs another of ZeRO's exchanges
// in place (its collectives follow this one's), or is `next` (kNoNode: none).
NodeId wait_anchor(const Graph& g, NodeId exchange, NodeId next) {
  const std::vector<NodeId> readers = g.consumers(g.node(exchange)->outputs[0]);
  const size_t until = next != kNoNode ? *g.position(next) : g.node_count();
  for (size_t i = *g.position(exchange) + 1; i < until; ++i) {
    const Node& n = *g.node_at(i);
    const ops::HostKind kind = ops::host_kind(n.op);
    const bool in_place = kind == ops::HostKind::ZeroShard || kind == ops::HostKind::ZeroGather ||
                          kind == ops::HostKind::ZeroAllReduce;
    if (n.phase == TDM_PHASE_OPTIMIZER || in_place || std::ranges::find(readers, n.id) != readers.end())
      return n.id;
  }
  return next;
}

// Every map of the model that names `from` names `to` instead.
void rename_in_model(ModelGraph& model, ValueId from, ValueId to) {
  for (auto& [parameter, gradient] : model.gradients)
    if (gradient == from) gradient = to;
  if (auto shard = model.zero.gradients.extract(from)) {
    shard.key() = to;
    model.zero.gradients.insert(std::move(shard));
  }
}

// The exchange's readers read the output of a zero.wait before `anchor`,
// which takes the exchanged value's name (and, for a gradient shard, its
// kind: the gradient the step keeps is the finished one).
Result<NodeId> add_wait(ModelGraph& model, NodeId exchange, NodeId anchor) {
  Graph& g = model.graph;
  const Node e = *g.node(exchange);
  const ValueId exchanged = e.outputs[0];
  const Value v = *g.value(exchanged);
  if (auto r = g.rename_value(exchanged, v.name + ".in_flight"); !r) return r.error();
  NodeSpec spec{ops::kZeroWait,           e.name + ".wait", e.layer, e.phase, {},
                {exchanged, e.inputs[0]}, {v.type},         {v.name}};
  auto wait = g.insert_node(std::move(spec), anchor);
  if (!wait) return wait.error();
  const ValueId result = g.node(*wait)->outputs[0];
  if (auto r = g.replace_uses(exchanged, result, *wait); !r) return r.error();
  if (v.kind != TDM_VALUE_ACTIVATION) {
    if (auto r = g.set_value_kind(exchanged, TDM_VALUE_ACTIVATION); !r) return r.error();
    if (auto r = g.set_value_kind(result, v.kind); !r) return r.error();
  }
  rename_in_model(model, exchanged, result);
  return *wait;
}

}  // namespace

Result<void> overlap_zero_exchanges(ModelGraph& model) {
  Graph& g = model.graph;
  const std::vector<Exchange> list = exchanges(g);
  // The gathers of one layer's forward (or backward) form a group; a group
  // starts once the group before it has been waited for.
  std::pair<std::string, tdm_phase> group;
  NodeId previous_group_end = kNoNode, group_end = kNoNode;
  for (size_t i = 0; i < list.size(); ++i) {
    const Exchange& ex = list[i];
    if (ex.gather) {
      const Node& n = *g.node(ex.node);
      if (std::pair(n.layer, n.phase) != group) {
        group = {n.layer, n.phase};
        previous_group_end = group_end;
      }
      // A gather reads a shard no node writes before the optimizer phase:
      // it may start as early as that.
      if (previous_group_end != kNoNode) {
        const size_t start = *g.position(previous_group_end) + 1;
        if (start < *g.position(ex.node))
          if (auto r = g.move_node(ex.node, g.node_at(start)->id); !r) return r;
      }
    }
    // A reduce-scatter's wait: before the second one after it starts.
    NodeId next = kNoNode;
    for (size_t k = i + 1, later = 0; !ex.gather && k < list.size() && next == kNoNode; ++k)
      if (!list[k].gather && ++later == kReduceScattersInFlight) next = list[k].node;
    auto wait = add_wait(model, ex.node, wait_anchor(g, ex.node, next));
    if (!wait) return wait.error();
    if (ex.gather && (group_end == kNoNode || *g.position(*wait) > *g.position(group_end))) group_end = *wait;
  }
  return {};
}

ValueId zero_exchange_result(const Graph& graph, ValueId exchanged) {
  for (NodeId reader : graph.consumers(exchanged))
    if (graph.node(reader)->op == ops::kZeroWait) return graph.node(reader)->outputs[0];
  return exchanged;
}

}  // namespace tandem::host::lowering
