#include "graph_snapshot.hpp"

namespace tandem::checkpointing {

size_t ValueCopy::bytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

tdm_tensor_desc ValueCopy::desc() const {
  tdm_tensor_desc d{};
  d.struct_size = sizeof d;
  d.dtype = dtype;
  d.rank = static_cast<uint32_t>(dims.size());
  d.dims = dims.data();
  return d;
}

const ValueCopy& GraphCopy::value(tdm_value_id id) const {
  for (const ValueCopy& v : values)
    if (v.id == id) return v;
  throw Error(TDM_INTERNAL, "checkpointing: value " + std::to_string(id) + " is not in the graph");
}

GraphCopy snapshot(const GraphEdit& graph) {
  GraphCopy g;
  for (NodeView& n : graph.nodes()) {
    NodeCopy c;
    static_cast<NodeView&>(c) = std::move(n);
    c.attrs = graph.attrs(c.id);
    c.annotated_inplace = graph.annotation(c.id, "tandem.inplace") != nullptr;
    c.kind = graph.op_kind(c.id);
    g.nodes.push_back(std::move(c));
  }
  for (ValueView& v : graph.values()) {
    ValueCopy c;
    static_cast<ValueView&>(c) = std::move(v);
    g.values.push_back(std::move(c));
  }
  return g;
}

}  // namespace tandem::checkpointing
