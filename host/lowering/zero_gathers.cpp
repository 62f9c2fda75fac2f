#include "lowering/zero_gathers.hpp"

#include <vector>

#include "lowering/again_for_backward.hpp"
#include "ops/op_table.hpp"

namespace tandem::host::lowering {

Result<void> gather_again_for_backward(ModelGraph& model) {
  Graph& g = model.graph;
  std::vector<NodeId> gathers;
  for (size_t i = 0; i < g.node_count(); ++i) {
    const Node& n = *g.node_at(i);
    if (ops::host_kind(n.op) == ops::HostKind::ZeroAllGather && n.phase == TDM_PHASE_FORWARD)
      gathers.push_back(n.id);
  }
  for (NodeId id : gathers)
    if (auto r = make_again_for_backward(g, {id}); !r) return r;
  return {};
}

}  // namespace tandem::host::lowering
