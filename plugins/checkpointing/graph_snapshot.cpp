#include "graph_snapshot.hpp"

namespace tandem::checkpointing {

void check(tdm_status status, const std::string& what) {
  if (status != TDM_OK) throw Error(status, "checkpointing: " + what + " failed");
}

tdm_attr OwnedAttr::view() const {
  tdm_attr a{};
  a.struct_size = sizeof a;
  a.name = name.c_str();
  a.type = type;
  a.i = i;
  a.f = f;
  a.s = s.c_str();
  a.ints = ints.data();
  a.floats = floats.data();
  a.count = type == TDM_ATTR_INTS ? ints.size() : floats.size();
  return a;
}

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

GraphCopy snapshot(const tdm_graph_api& api, const tdm_graph* graph) {
  GraphCopy g;
  for (size_t i = 0; i < api.node_count(graph); ++i) {
    tdm_node_info n{};
    n.struct_size = sizeof n;
    check(api.node_at(graph, i, &n), "node_at");
    NodeCopy c;
    c.id = n.id;
    c.op = n.op;
    c.name = n.name;
    c.layer = n.layer != nullptr ? n.layer : "";
    c.phase = n.phase;
    for (size_t k = 0; k < n.n_inputs; ++k) {
      tdm_value_id v = TDM_NO_VALUE;
      check(api.node_input(graph, n.id, k, &v), "node_input");
      c.inputs.push_back(v);
    }
    for (size_t k = 0; k < n.n_outputs; ++k) {
      tdm_value_id v = TDM_NO_VALUE;
      check(api.node_output(graph, n.id, k, &v), "node_output");
      c.outputs.push_back(v);
    }
    for (size_t k = 0; k < n.n_attrs; ++k) {
      tdm_attr a{};
      a.struct_size = sizeof a;
      check(api.node_attr_at(graph, n.id, k, &a), "node_attr_at");
      OwnedAttr o;
      o.name = a.name;
      o.type = a.type;
      o.i = a.i;
      o.f = a.f;
      if (a.s != nullptr) o.s = a.s;
      if (a.type == TDM_ATTR_INTS && a.ints != nullptr) o.ints.assign(a.ints, a.ints + a.count);
      if (a.type == TDM_ATTR_FLOATS && a.floats != nullptr) o.floats.assign(a.floats, a.floats + a.count);
      c.attrs.push_back(std::move(o));
    }
    c.annotated_inplace = api.node_annotation(graph, n.id, "tandem.inplace") != nullptr;
    g.nodes.push_back(std::move(c));
  }
  for (size_t i = 0; i < api.value_count(graph); ++i) {
    tdm_value_info v{};
    v.struct_size = sizeof v;
    check(api.value_at(graph, i, &v), "value_at");
    ValueCopy c;
    c.id = v.id;
    c.name = v.name;
    c.kind = v.kind;
    c.dtype = v.desc.dtype;
    c.dims.assign(v.desc.dims, v.desc.dims + v.desc.rank);
    c.producer = v.producer;
    g.values.push_back(std::move(c));
  }
  return g;
}

}  // namespace tandem::checkpointing
