#include "lowering/again_for_backward.hpp"

#include <map>

namespace tandem::host {

Result<void> make_again_for_backward(Graph& g, const std::vector<NodeId>& chain) {
  const ValueId result = g.node(chain.back())->outputs[0];
  std::vector<NodeId> readers;
  NodeId first = kNoNode;
  for (NodeId reader : g.consumers(result)) {
    if (g.node(reader)->phase == TDM_PHASE_FORWARD) continue;
    readers.push_back(reader);
    if (first == kNoNode || *g.position(reader) < *g.position(first)) first = reader;
  }
  if (readers.empty()) return {};
  std::map<ValueId, ValueId> copies;  // forward value -> its backward copy
  for (NodeId id : chain) {
    const Node forward = *g.node(id);
    NodeSpec spec{forward.op,    forward.name + ".backward", forward.layer, TDM_PHASE_BACKWARD, forward.attrs,
                  forward.inputs};
    for (ValueId& in : spec.inputs)
      if (auto c = copies.find(in); c != copies.end()) in = c->second;
    for (ValueId out : forward.outputs) {
      spec.outputs.push_back(g.value(out)->type);
      spec.output_names.push_back(g.value(out)->name + ".backward");
    }
    auto again = g.insert_node(std::move(spec), first);
    if (!again) return again.error();
    if (!forward.device.empty())
      if (auto r = g.set_device(*again, forward.device); !r) return r;
    for (size_t k = 0; k < forward.outputs.size(); ++k)
      copies[forward.outputs[k]] = g.node(*again)->outputs[k];
  }
  for (NodeId reader : readers) {
    const std::vector<ValueId> inputs = g.node(reader)->inputs;
    for (size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k] == result)
        if (auto r = g.set_input(reader, k, copies.at(result)); !r) return r;
  }
  return {};
}

}  // namespace tandem::host
