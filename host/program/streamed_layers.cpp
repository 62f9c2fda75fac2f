#include "program/streamed_layers.hpp"

#include "exec/tensor_text.hpp"
#include "ops/op_table.hpp"

namespace tandem::host::program {

bool layer_streamed(const model::ModelSpec& spec, const std::string& layer, bool all_layers) {
  for (const model::LayerSpec& l : spec.layers)
    if (l.name == layer) return l.stream.value_or(all_layers);
  return all_layers;
}

std::set<std::string> streamed_values(const lowering::ModelGraph& model, const model::ModelSpec& spec,
                                      bool all_layers) {
  const Graph& g = model.graph;
  std::set<std::string> names;
  for (ValueId p : model.parameters) {
    const std::vector<NodeId> readers = g.consumers(p);
    if (readers.empty()) continue;
    // The layer whose node reads it first (a tied weight: its owner's).
    if (!layer_streamed(spec, g.node(readers.front())->layer, all_layers)) continue;
    const Value& param = *g.value(p);
    const size_t bytes = exec::tensor_bytes(param.type);
    names.insert(param.name);
    if (auto grad = model.gradients.find(p); grad != model.gradients.end())
      names.insert(g.value(grad->second)->name);
    for (NodeId id : readers) {
      const Node& update = *g.node(id);
      if (!ops::is(update.op, ops::kOptimizer)) continue;
      for (ValueId in : update.inputs) {
        if (in == kNoValue) continue;
        const Value& v = *g.value(in);
        const bool persistent = v.kind != TDM_VALUE_ACTIVATION || v.producer == kNoNode;
        if (persistent && v.kind != TDM_VALUE_INPUT && exec::tensor_bytes(v.type) == bytes)
          names.insert(v.name);
      }
    }
  }
  return names;
}

}  // namespace tandem::host::program
