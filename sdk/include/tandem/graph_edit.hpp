// Tandem SDK C++ helper (header-only, not part of the C ABI): the host's
// graph (tdm_graph_api) as C++ values, for feature plugins' graph passes.
//
//   void graph_pass(tdm_graph* graph) override {
//     tandem::GraphEdit g(graph);
//     for (const tandem::NodeView& n : g.nodes()) { ... g.insert({...}); ... }
//   }
//
// Everything returned is copied out of the host's storage, because the
// host's strings and arrays die at the next modification of the graph.
// Failures throw tandem::Error (the feature trampolines turn it into a
// status and a host message).
#ifndef TANDEM_GRAPH_EDIT_HPP
#define TANDEM_GRAPH_EDIT_HPP

#include <set>
#include <string>
#include <vector>

#include "tandem/op_catalog.hpp"
#include "tandem/tandem.hpp"

namespace tandem {

// What a node's op is (node_op_info, ABI 1.13): decide from this rather
// than from op names, so a pass treats an op added to the catalog later
// as what it is.
struct OpKind {
  bool known = false;                        // a catalog or host op; false: a plugin's own op (flags 0)
  uint32_t flags = 0;                        // TDM_OP_*
  uint64_t f32_inputs = 0, f32_outputs = 0;  // slots fixed at f32 whatever the data's dtype
  bool is(uint32_t flag) const noexcept { return (flags & flag) != 0; }
};

struct NodeView {
  tdm_node_id id = -1;
  std::string op, name, layer;
  tdm_phase phase = TDM_PHASE_FORWARD;
  std::vector<tdm_value_id> inputs, outputs;
};

struct ValueView {
  tdm_value_id id = TDM_NO_VALUE;
  std::string name;
  tdm_value_kind kind = TDM_VALUE_ACTIVATION;
  tdm_dtype dtype = TDM_DTYPE_INVALID;
  std::vector<int64_t> dims;
  tdm_node_id producer = -1;
};

// An attribute with its own storage (tdm_attr only points).
struct OwnedAttr {
  std::string name, s;
  tdm_attr_type type = TDM_ATTR_INT;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  // The C view, valid while this object lives unchanged.
  tdm_attr view() const {
    tdm_attr a{};
    a.struct_size = sizeof a;
    a.name = name.c_str();
    a.type = type;
    a.i = i;
    a.f = f;
    a.s = s.c_str();
    a.ints = ints.data();
    a.floats = floats.data();
    a.count = type == TDM_ATTR_INTS ? ints.size() : type == TDM_ATTR_FLOATS ? floats.size() : 0;
    return a;
  }
};

class GraphEdit {
 public:
  explicit GraphEdit(tdm_graph* graph) : graph_(graph), g_(*Host::api()->graph) {}

  std::vector<NodeView> nodes() const;  // schedule order
  NodeView node(tdm_node_id id) const;
  ValueView value(tdm_value_id id) const;
  std::vector<ValueView> values() const;
  std::vector<OwnedAttr> attrs(tdm_node_id id, size_t n_attrs) const;
  std::vector<OwnedAttr> attrs(tdm_node_id id) const;
  const char* annotation(tdm_node_id id, const char* key) const {
    return g_.node_annotation(graph_, id, key);
  }
  // What node `id`'s op is. From a host older than ABI 1.13, the answer
  // of the catalog this plugin was built with.
  OpKind op_kind(tdm_node_id id) const;
  // The node scheduled right after `id`, or -1 when it is the last.
  tdm_node_id next_after(tdm_node_id id) const;

  struct Spec {
    std::string op, name, layer;
    tdm_phase phase = TDM_PHASE_FORWARD;
    std::vector<OwnedAttr> attrs;
    std::vector<tdm_value_id> inputs;
    std::vector<ValueView> outputs;  // dtype and dims used
    tdm_node_id anchor = -1;
  };
  tdm_node_id insert(const Spec& spec);
  tdm_value_id output(tdm_node_id id, size_t i) const;
  void remove(tdm_node_id id);
  void set_input(tdm_node_id id, size_t i, tdm_value_id v);
  void replace_uses(tdm_value_id from, tdm_value_id to, tdm_node_id except);
  tdm_value_id add_state(const std::string& name, tdm_dtype dtype, const std::vector<int64_t>& dims,
                         double initial);
  // A state shaped like `source` that starts as a copy of it (ABI 1.12).
  tdm_value_id add_state_copy(const std::string& name, tdm_value_id source);
  void annotate(tdm_node_id id, const char* key, const char* value);
  // A node name not yet used in the graph, starting from `base`.
  std::string fresh_name(const std::string& base) const;

 private:
  tdm_graph* graph_;
  const tdm_graph_api& g_;
};

namespace graph_edit_detail {

inline void check(tdm_status status, const std::string& what) {
  if (status != TDM_OK) throw tandem::Error(status, "graph edit: " + what + " failed");
}

inline NodeView view_of(const tdm_graph_api& g, const tdm_graph* graph, const tdm_node_info& n) {
  NodeView v;
  v.id = n.id;
  v.op = n.op;
  v.name = n.name;
  v.layer = n.layer != nullptr ? n.layer : "";
  v.phase = n.phase;
  for (size_t i = 0; i < n.n_inputs; ++i) {
    tdm_value_id id = TDM_NO_VALUE;
    graph_edit_detail::check(g.node_input(graph, n.id, i, &id), "node_input");
    v.inputs.push_back(id);
  }
  for (size_t i = 0; i < n.n_outputs; ++i) {
    tdm_value_id id = TDM_NO_VALUE;
    graph_edit_detail::check(g.node_output(graph, n.id, i, &id), "node_output");
    v.outputs.push_back(id);
  }
  return v;
}

inline ValueView view_of(const tdm_value_info& info) {
  ValueView v;
  v.id = info.id;
  v.name = info.name;
  v.kind = info.kind;
  v.dtype = info.desc.dtype;
  if (info.desc.rank > 0) v.dims.assign(info.desc.dims, info.desc.dims + info.desc.rank);
  v.producer = info.producer;
  return v;
}

}  // namespace graph_edit_detail

inline std::vector<NodeView> GraphEdit::nodes() const {
  std::vector<NodeView> out;
  for (size_t i = 0; i < g_.node_count(graph_); ++i) {
    tdm_node_info n{};
    n.struct_size = sizeof n;
    graph_edit_detail::check(g_.node_at(graph_, i, &n), "node_at");
    out.push_back(graph_edit_detail::view_of(g_, graph_, n));
  }
  return out;
}

inline NodeView GraphEdit::node(tdm_node_id id) const {
  tdm_node_info n{};
  n.struct_size = sizeof n;
  graph_edit_detail::check(g_.node_get(graph_, id, &n), "node_get");
  return graph_edit_detail::view_of(g_, graph_, n);
}

inline ValueView GraphEdit::value(tdm_value_id id) const {
  tdm_value_info v{};
  v.struct_size = sizeof v;
  graph_edit_detail::check(g_.value_get(graph_, id, &v), "value_get");
  return graph_edit_detail::view_of(v);
}

inline std::vector<ValueView> GraphEdit::values() const {
  std::vector<ValueView> out;
  for (size_t i = 0; i < g_.value_count(graph_); ++i) {
    tdm_value_info v{};
    v.struct_size = sizeof v;
    graph_edit_detail::check(g_.value_at(graph_, i, &v), "value_at");
    out.push_back(graph_edit_detail::view_of(v));
  }
  return out;
}

inline std::vector<OwnedAttr> GraphEdit::attrs(tdm_node_id id) const {
  tdm_node_info n{};
  n.struct_size = sizeof n;
  graph_edit_detail::check(g_.node_get(graph_, id, &n), "node_get");
  return attrs(id, n.n_attrs);
}

inline std::vector<OwnedAttr> GraphEdit::attrs(tdm_node_id id, size_t n_attrs) const {
  std::vector<OwnedAttr> out;
  for (size_t i = 0; i < n_attrs; ++i) {
    tdm_attr a{};
    a.struct_size = sizeof a;
    graph_edit_detail::check(g_.node_attr_at(graph_, id, i, &a), "node_attr_at");
    OwnedAttr o;
    o.name = a.name;
    o.type = a.type;
    o.i = a.i;
    o.f = a.f;
    if (a.type == TDM_ATTR_STRING && a.s != nullptr) o.s = a.s;
    if (a.type == TDM_ATTR_INTS && a.ints != nullptr) o.ints.assign(a.ints, a.ints + a.count);
    if (a.type == TDM_ATTR_FLOATS && a.floats != nullptr) o.floats.assign(a.floats, a.floats + a.count);
    out.push_back(std::move(o));
  }
  return out;
}

inline tdm_node_id GraphEdit::next_after(tdm_node_id id) const {
  const size_t count = g_.node_count(graph_);
  for (size_t i = 0; i < count; ++i) {
    tdm_node_info n{};
    n.struct_size = sizeof n;
    graph_edit_detail::check(g_.node_at(graph_, i, &n), "node_at");
    if (n.id != id) continue;
    if (i + 1 == count) return -1;
    tdm_node_info next{};
    next.struct_size = sizeof next;
    graph_edit_detail::check(g_.node_at(graph_, i + 1, &next), "node_at");
    return next.id;
  }
  throw tandem::Error(TDM_INTERNAL, "graph edit: node " + std::to_string(id) + " is not in the schedule");
}

inline tdm_node_id GraphEdit::insert(const Spec& spec) {
  std::vector<tdm_attr> attrs;
  for (const OwnedAttr& o : spec.attrs) attrs.push_back(o.view());
  std::vector<tdm_tensor_desc> outputs;
  for (const ValueView& v : spec.outputs) {
    tdm_tensor_desc d{};
    d.struct_size = sizeof d;
    d.dtype = v.dtype;
    d.rank = static_cast<uint32_t>(v.dims.size());
    d.dims = v.dims.empty() ? nullptr : v.dims.data();
    outputs.push_back(d);
  }
  tdm_node_spec s{};
  s.struct_size = sizeof s;
  s.op = spec.op.c_str();
  s.name = spec.name.c_str();
  s.layer = spec.layer.empty() ? nullptr : spec.layer.c_str();
  s.phase = spec.phase;
  s.attrs = attrs.data();
  s.n_attrs = attrs.size();
  s.inputs = spec.inputs.data();
  s.n_inputs = spec.inputs.size();
  s.outputs = outputs.data();
  s.n_outputs = outputs.size();
  s.anchor = spec.anchor;
  tdm_node_id id = -1;
  graph_edit_detail::check(g_.node_insert(graph_, &s, &id), "inserting node '" + spec.name + "'");
  return id;
}

inline tdm_value_id GraphEdit::output(tdm_node_id id, size_t i) const {
  tdm_value_id v = TDM_NO_VALUE;
  graph_edit_detail::check(g_.node_output(graph_, id, i, &v), "node_output");
  return v;
}

inline void GraphEdit::remove(tdm_node_id id) {
  graph_edit_detail::check(g_.node_remove(graph_, id), "removing node " + std::to_string(id));
}

inline void GraphEdit::set_input(tdm_node_id id, size_t i, tdm_value_id v) {
  graph_edit_detail::check(g_.node_set_input(graph_, id, i, v), "node_set_input");
}

inline void GraphEdit::replace_uses(tdm_value_id from, tdm_value_id to, tdm_node_id except) {
  graph_edit_detail::check(g_.value_replace_uses(graph_, from, to, except), "value_replace_uses");
}

inline tdm_value_id GraphEdit::add_state(const std::string& name, tdm_dtype dtype,
                                         const std::vector<int64_t>& dims, double initial) {
  tdm_tensor_desc d{};
  d.struct_size = sizeof d;
  d.dtype = dtype;
  d.rank = static_cast<uint32_t>(dims.size());
  d.dims = dims.empty() ? nullptr : dims.data();
  tdm_value_id id = TDM_NO_VALUE;
  graph_edit_detail::check(g_.state_add(graph_, name.c_str(), &d, initial, &id),
                           "adding state '" + name + "'");
  return id;
}

inline tdm_value_id GraphEdit::add_state_copy(const std::string& name, tdm_value_id source) {
  if (!TDM_STRUCT_HAS(&g_, tdm_graph_api, state_add_copy) || g_.state_add_copy == nullptr)
    throw tandem::Error(TDM_UNSUPPORTED, "graph edit: adding state '" + name +
                                             "' as a copy needs a host of ABI 1.12 or newer; update tandem");
  tdm_value_id id = TDM_NO_VALUE;
  graph_edit_detail::check(g_.state_add_copy(graph_, name.c_str(), source, &id),
                           "adding state '" + name + "'");
  return id;
}

inline OpKind GraphEdit::op_kind(tdm_node_id id) const {
  OpKind kind;
  if (TDM_STRUCT_HAS(&g_, tdm_graph_api, node_op_info) && g_.node_op_info != nullptr) {
    tdm_op_info info{};
    info.struct_size = sizeof info;
    const tdm_status status = g_.node_op_info(graph_, id, &info);
    if (status == TDM_NOT_FOUND) return kind;
    graph_edit_detail::check(status, "asking what node " + std::to_string(id) + "'s op is");
    return {true, info.flags, info.f32_inputs, info.f32_outputs};
  }
  const catalog::Op* op = catalog::find(node(id).op);
  if (op == nullptr) return kind;
  return {true, op->flags, catalog::fixed_f32_mask(op->inputs), catalog::fixed_f32_mask(op->outputs)};
}

inline void GraphEdit::annotate(tdm_node_id id, const char* key, const char* value) {
  graph_edit_detail::check(g_.node_annotate(graph_, id, key, value), std::string("annotating ") + key);
}

inline std::string GraphEdit::fresh_name(const std::string& base) const {
  std::set<std::string> used;
  for (const NodeView& n : nodes()) used.insert(n.name);
  std::string name = base;
  for (int i = 2; used.count(name) > 0; ++i) name = base + std::to_string(i);
  return name;
}

}  // namespace tandem

#endif  // TANDEM_GRAPH_EDIT_HPP
