#include "lowering/zero_gathers.hpp"

#include <vector>

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
  for (NodeId id : gathers) {
    const Node forward = *g.node(id);
    const ValueId whole = forward.outputs[0];
    std::vector<NodeId> readers;
    for (NodeId reader : g.consumers(whole))
      if (g.node(reader)->phase != TDM_PHASE_FORWARD) readers.push_back(reader);
    if (readers.empty()) continue;
    NodeSpec spec{forward.op,
                  forward.name + ".backward",
                  forward.layer,
                  TDM_PHASE_BACKWARD,
                  {},
                  forward.inputs,
                  {g.value(whole)->type},
                  {g.value(whole)->name + ".backward"}};
    auto again = g.insert_node(std::move(spec), readers.front());
    if (!again) return again.error();
    const ValueId copy = g.node(*again)->outputs[0];
    for (NodeId reader : readers) {
      const std::vector<ValueId> inputs = g.node(reader)->inputs;
      for (size_t k = 0; k < inputs.size(); ++k)
        if (inputs[k] == whole)
          if (auto r = g.set_input(reader, k, copy); !r) return r;
    }
  }
  return {};
}

}  // namespace tandem::host::lowering
