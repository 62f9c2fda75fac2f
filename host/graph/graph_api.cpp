#include "graph/graph_api.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "ops/op_table.hpp"
#include "plugin/call_window.hpp"
#include "tandem/op_catalog.hpp"
#include "util/last_error.hpp"

namespace tandem::host {
namespace {

const Graph& as_graph(const tdm_graph* g) {
  return *reinterpret_cast<const Graph*>(g);
}
Graph& as_graph(tdm_graph* g) {
  return *reinterpret_cast<Graph*>(g);
}

tdm_status fail(tdm_status code, std::string message) {
  record_last_error(code, "graph", std::move(message));
  return code;
}

tdm_status from_result(const Result<void>& r) {
  return r ? TDM_OK : fail(r.error().status, r.error().message);
}

// Writes the fields of `full` that fit the receiver's struct_size (sdk/ABI.md rule 4).
template <class T>
tdm_status copy_fitting(const T& full, T* out) {
  if (out == nullptr) return fail(TDM_INVALID_ARGUMENT, "output pointer is NULL");
  size_t size = out->struct_size < sizeof(T) ? out->struct_size : sizeof(T);
  if (size > sizeof(uint32_t))
    std::memcpy(reinterpret_cast<char*>(out) + sizeof(uint32_t),
                reinterpret_cast<const char*>(&full) + sizeof(uint32_t), size - sizeof(uint32_t));
  return TDM_OK;
}

// Why graph `g` may not be used by `function` now (CallWindow); "" if it may.
std::string closed(const tdm_graph* g, const char* function) {
  return CallWindow::refusal(CallWindow::kGraphPass, g, function);
}

// Every entry point catches everything: no exception crosses into the
// plugin; and works only inside the pass's window.
template <class Body>
tdm_status guarded(const tdm_graph* g, const char* function, Body&& body) noexcept {
  try {
    if (g != nullptr)
      if (std::string why = closed(g, function); !why.empty())
        return fail(TDM_INVALID_ARGUMENT, std::move(why));
    return body();
  } catch (const std::bad_alloc&) {
    return fail(TDM_OUT_OF_MEMORY, "host memory exhausted while editing the graph");
  } catch (const std::exception& e) {
    return fail(TDM_INTERNAL, std::string("graph: ") + e.what());
  } catch (...) {
    return fail(TDM_INTERNAL, "graph: unknown exception");
  }
}

tdm_node_info node_info_of(const Node& n) {
  tdm_node_info info{};
  info.struct_size = sizeof info;
  info.id = n.id;
  info.op = n.op.c_str();
  info.name = n.name.c_str();
  info.layer = n.layer.c_str();
  info.phase = n.phase;
  info.device = n.device.empty() ? nullptr : n.device.c_str();
  info.n_inputs = n.inputs.size();
  info.n_outputs = n.outputs.size();
  info.n_attrs = n.attrs.size();
  return info;
}

tdm_value_info value_info_of(const Value& v) {
  tdm_value_info info{};
  info.struct_size = sizeof info;
  info.id = v.id;
  info.name = v.name.c_str();
  info.kind = v.kind;
  info.desc.struct_size = sizeof info.desc;
  info.desc.dtype = v.type.dtype;
  info.desc.rank = static_cast<uint32_t>(v.type.dims.size());
  info.desc.dims = v.type.dims.empty() ? nullptr : v.type.dims.data();
  info.desc.strides = nullptr;
  info.producer = v.producer;
  return info;
}

TensorType type_from_c(const tdm_tensor_desc& d) {
  TensorType t;
  t.dtype = d.dtype;
  if (d.dims != nullptr) t.dims.assign(d.dims, d.dims + d.rank);
  return t;
}

size_t g_node_count(const tdm_graph* g) {
  if (g == nullptr) return 0;
  if (std::string why = closed(g, "node_count"); !why.empty()) {
    fail(TDM_INVALID_ARGUMENT, std::move(why));
    return 0;
  }
  return as_graph(g).node_count();
}

tdm_status g_node_at(const tdm_graph* g, size_t index, tdm_node_info* out) {
  return guarded(g, "node_at", [&]() -> tdm_status {
    if (g == nullptr) return fail(TDM_INVALID_ARGUMENT, "graph is NULL");
    const Node* n = as_graph(g).node_at(index);
    if (n == nullptr)
      return fail(TDM_NOT_FOUND, "node index " + std::to_string(index) + " is past the end (" +
                                     std::to_string(as_graph(g).node_count()) + " nodes)");
    return copy_fitting(node_info_of(*n), out);
  });
}

tdm_status g_node_get(const tdm_graph* g, tdm_node_id id, tdm_node_info* out) {
  return guarded(g, "node_get", [&]() -> tdm_status {
    if (g == nullptr) return fail(TDM_INVALID_ARGUMENT, "graph is NULL");
    const Node* n = as_graph(g).node(id);
    if (n == nullptr) return fail(TDM_INVALID_ARGUMENT, "unknown node id " + std::to_string(id));
    return copy_fitting(node_info_of(*n), out);
  });
}

tdm_status g_node_port(const tdm_graph* g, tdm_node_id id, size_t i, tdm_value_id* out, bool input) {
  return guarded(g, "node_input", [&]() -> tdm_status {
    if (g == nullptr || out == nullptr) return fail(TDM_INVALID_ARGUMENT, "graph or output pointer is NULL");
    const Node* n = as_graph(g).node(id);
    if (n == nullptr) return fail(TDM_INVALID_ARGUMENT, "unknown node id " + std::to_string(id));
    const std::vector<ValueId>& ports = input ? n->inputs : n->outputs;
    if (i >= ports.size())
      return fail(TDM_NOT_FOUND, "node '" + n->name + "' has " + std::to_string(ports.size()) +
                                     (input ? " inputs" : " outputs") + "; index " + std::to_string(i) +
                                     " is past the end");
    *out = ports[i];
    return TDM_OK;
  });
}

tdm_status g_node_input(const tdm_graph* g, tdm_node_id id, size_t i, tdm_value_id* out) {
  return g_node_port(g, id, i, out, true);
}

tdm_status g_node_output(const tdm_graph* g, tdm_node_id id, size_t i, tdm_value_id* out) {
  return g_node_port(g, id, i, out, false);
}

tdm_status g_node_attr_at(const tdm_graph* g, tdm_node_id id, size_t i, tdm_attr* out) {
  return guarded(g, "node_attr_at", [&]() -> tdm_status {
    if (g == nullptr) return fail(TDM_INVALID_ARGUMENT, "graph is NULL");
    const Node* n = as_graph(g).node(id);
    if (n == nullptr) return fail(TDM_INVALID_ARGUMENT, "unknown node id " + std::to_string(id));
    if (i >= n->attrs.size()) return TDM_NOT_FOUND;  // the normal end of iteration
    return copy_fitting(attr_to_c(n->attrs[i]), out);
  });
}

size_t g_value_count(const tdm_graph* g) {
  if (g == nullptr) return 0;
  if (std::string why = closed(g, "value_count"); !why.empty()) {
    fail(TDM_INVALID_ARGUMENT, std::move(why));
    return 0;
  }
  return as_graph(g).value_count();
}

tdm_status g_value_at(const tdm_graph* g, size_t index, tdm_value_info* out) {
  return guarded(g, "value_at", [&]() -> tdm_status {
    if (g == nullptr) return fail(TDM_INVALID_ARGUMENT, "graph is NULL");
    const Value* v = as_graph(g).value_at(index);
    if (v == nullptr) return fail(TDM_NOT_FOUND, "value index " + std::to_string(index) + " is past the end");
    return copy_fitting(value_info_of(*v), out);
  });
}

tdm_status g_value_get(const tdm_graph* g, tdm_value_id id, tdm_value_info* out) {
  return guarded(g, "value_get", [&]() -> tdm_status {
    if (g == nullptr) return fail(TDM_INVALID_ARGUMENT, "graph is NULL");
    const Value* v = as_graph(g).value(id);
    if (v == nullptr) return fail(TDM_INVALID_ARGUMENT, "unknown value id " + std::to_string(id));
    return copy_fitting(value_info_of(*v), out);
  });
}

tdm_status g_node_insert(tdm_graph* g, const tdm_node_spec* spec, tdm_node_id* out_id) {
  return guarded(g, "node_insert", [&]() -> tdm_status {
    if (g == nullptr || spec == nullptr) return fail(TDM_INVALID_ARGUMENT, "graph or node spec is NULL");
    if (spec->struct_size < TDM_STRUCT_SIZE(tdm_node_spec, anchor))
      return fail(TDM_INVALID_ARGUMENT, "node spec struct_size " + std::to_string(spec->struct_size) +
                                            " is smaller than the ABI 1.0 minimum");
    if (spec->op == nullptr || spec->name == nullptr)
      return fail(TDM_INVALID_ARGUMENT, "node spec needs op and name");
    NodeSpec s;
    s.op = spec->op;
    s.name = spec->name;
    if (spec->layer != nullptr) s.layer = spec->layer;
    s.phase = spec->phase;
    for (size_t i = 0; i < spec->n_attrs; ++i) {
      Result<Attr> a = attr_from_c(spec->attrs[i]);
      if (!a) return fail(TDM_INVALID_ARGUMENT, "node '" + s.name + "': " + a.error().message);
      s.attrs.push_back(std::move(*a));
    }
    if (spec->n_inputs > 0 && spec->inputs == nullptr)
      return fail(TDM_INVALID_ARGUMENT, "node spec inputs is NULL");
    s.inputs.assign(spec->inputs, spec->inputs + spec->n_inputs);
    if (spec->n_outputs > 0 && spec->outputs == nullptr)
      return fail(TDM_INVALID_ARGUMENT, "node spec outputs is NULL");
    for (size_t i = 0; i < spec->n_outputs; ++i) s.outputs.push_back(type_from_c(spec->outputs[i]));
    // A catalog op must have the outputs its shape rule gives (the SDK's,
    // tandem/op_shapes.hpp): said here, naming the pass's node, rather than by a
    // backend at prepare. Unknown input ids are insert_node's to report.
    const Graph& graph = as_graph(g);
    const bool known = std::all_of(s.inputs.begin(), s.inputs.end(),
                                   [&](ValueId v) { return v == kNoValue || graph.value(v) != nullptr; });
    if (known)
      if (auto checked = ops::check_outputs(graph, s.op, s.inputs, s.attrs, s.outputs); !checked)
        return fail(TDM_INVALID_ARGUMENT, "node '" + s.name + "': " + checked.error().message);
    Result<NodeId> id = as_graph(g).insert_node(std::move(s), spec->anchor);
    if (!id) return fail(id.error().status, id.error().message);
    if (out_id != nullptr) *out_id = *id;
    return TDM_OK;
  });
}

tdm_status g_node_remove(tdm_graph* g, tdm_node_id id) {
  return guarded(g, "node_remove", [&] {
    return g == nullptr ? fail(TDM_INVALID_ARGUMENT, "graph is NULL")
                        : from_result(as_graph(g).remove_node(id));
  });
}

tdm_status g_node_set_input(tdm_graph* g, tdm_node_id id, size_t i, tdm_value_id value) {
  return guarded(g, "node_set_input", [&] {
    return g == nullptr ? fail(TDM_INVALID_ARGUMENT, "graph is NULL")
                        : from_result(as_graph(g).set_input(id, i, value));
  });
}

tdm_status g_node_set_attr(tdm_graph* g, tdm_node_id id, const tdm_attr* attr) {
  return guarded(g, "node_set_attr", [&]() -> tdm_status {
    if (g == nullptr || attr == nullptr) return fail(TDM_INVALID_ARGUMENT, "graph or attribute is NULL");
    Result<Attr> a = attr_from_c(*attr);
    if (!a) return fail(TDM_INVALID_ARGUMENT, a.error().message);
    return from_result(as_graph(g).set_attr(id, std::move(*a)));
  });
}

tdm_status g_value_replace_uses(tdm_graph* g, tdm_value_id from, tdm_value_id to, tdm_node_id except) {
  return guarded(g, "value_replace_uses", [&] {
    return g == nullptr ? fail(TDM_INVALID_ARGUMENT, "graph is NULL")
                        : from_result(as_graph(g).replace_uses(from, to, except));
  });
}

tdm_status g_state_add(tdm_graph* g, const char* name, const tdm_tensor_desc* desc, double initial,
                       tdm_value_id* out) {
  return guarded(g, "state_add", [&]() -> tdm_status {
    if (g == nullptr || name == nullptr || desc == nullptr)
      return fail(TDM_INVALID_ARGUMENT, "graph, name or tensor description is NULL");
    Result<ValueId> id = as_graph(g).add_state(name, type_from_c(*desc), initial);
    if (!id) return fail(id.error().status, id.error().message);
    if (out != nullptr) *out = *id;
    return TDM_OK;
  });
}

tdm_status g_state_add_copy(tdm_graph* g, const char* name, tdm_value_id source, tdm_value_id* out) {
  return guarded(g, "state_add_copy", [&]() -> tdm_status {
    if (g == nullptr || name == nullptr) return fail(TDM_INVALID_ARGUMENT, "graph or name is NULL");
    Result<ValueId> id = as_graph(g).add_state_copy(name, source);
    if (!id) return fail(id.error().status, id.error().message);
    if (out != nullptr) *out = *id;
    return TDM_OK;
  });
}

tdm_status g_node_annotate(tdm_graph* g, tdm_node_id id, const char* key, const char* value) {
  return guarded(g, "node_annotate", [&]() -> tdm_status {
    if (g == nullptr || key == nullptr) return fail(TDM_INVALID_ARGUMENT, "graph or annotation key is NULL");
    std::optional<std::string> v;
    if (value != nullptr) v = value;
    if (v && std::strcmp(key, "tandem.inplace") == 0)
      if (const Node* n = as_graph(g).node(id))
        if (auto checked = ops::check_inplace_request(*n, *v); !checked) return from_result(checked);
    return from_result(as_graph(g).annotate(id, key, v));
  });
}

const char* g_node_annotation(const tdm_graph* g, tdm_node_id id, const char* key) {
  if (g == nullptr || key == nullptr) return nullptr;
  if (std::string why = closed(g, "node_annotation"); !why.empty()) {
    fail(TDM_INVALID_ARGUMENT, std::move(why));
    return nullptr;
  }
  const Node* n = as_graph(g).node(id);
  if (n == nullptr) return nullptr;
  auto it = n->annotations.find(key);
  return it == n->annotations.end() ? nullptr : it->second.c_str();
}

tdm_status g_node_op_info(const tdm_graph* g, tdm_node_id id, tdm_op_info* out) {
  return guarded(g, "node_op_info", [&]() -> tdm_status {
    if (g == nullptr) return fail(TDM_INVALID_ARGUMENT, "graph is NULL");
    const Node* n = as_graph(g).node(id);
    if (n == nullptr) return fail(TDM_INVALID_ARGUMENT, "no node with id " + std::to_string(id));
    const ops::OpInfo* info = ops::find(n->op);
    if (info == nullptr)
      return fail(TDM_NOT_FOUND, "op '" + n->op + "' of node '" + n->name + "' is not a catalog op");
    tdm_op_info full{};
    full.flags = info->flags;
    if (const catalog::Op* op = catalog::find(n->op)) {
      full.f32_inputs = catalog::fixed_f32_mask(op->inputs);
      full.f32_outputs = catalog::fixed_f32_mask(op->outputs);
    }
    return copy_fitting(full, out);
  });
}

}  // namespace

Result<Attr> attr_from_c(const tdm_attr& a) {
  if (a.name == nullptr || a.name[0] == '\0')
    return make_error("an attribute needs a name", TDM_INVALID_ARGUMENT);
  Attr out;
  out.name = a.name;
  switch (a.type) {
    case TDM_ATTR_INT:
      out.value = a.i;
      break;
    case TDM_ATTR_FLOAT:
      out.value = a.f;
      break;
    case TDM_ATTR_STRING:
      if (a.s == nullptr)
        return make_error("string attribute '" + out.name + "' is NULL", TDM_INVALID_ARGUMENT);
      out.value = std::string(a.s);
      break;
    case TDM_ATTR_INTS:
      if (a.count > 0 && a.ints == nullptr)
        return make_error("attribute '" + out.name + "' has no integer array", TDM_INVALID_ARGUMENT);
      out.value = std::vector<int64_t>(a.ints, a.ints + a.count);
      break;
    case TDM_ATTR_FLOATS:
      if (a.count > 0 && a.floats == nullptr)
        return make_error("attribute '" + out.name + "' has no float array", TDM_INVALID_ARGUMENT);
      out.value = std::vector<double>(a.floats, a.floats + a.count);
      break;
    default:
      return make_error("attribute '" + out.name + "' has unknown type " + std::to_string(a.type),
                        TDM_INVALID_ARGUMENT);
  }
  return out;
}

const tdm_graph_api* graph_api_table() {
  static const tdm_graph_api api = [] {
    tdm_graph_api t{};
    t.struct_size = sizeof t;
    t.node_count = g_node_count;
    t.node_at = g_node_at;
    t.node_get = g_node_get;
    t.node_input = g_node_input;
    t.node_output = g_node_output;
    t.node_attr_at = g_node_attr_at;
    t.value_count = g_value_count;
    t.value_at = g_value_at;
    t.value_get = g_value_get;
    t.node_insert = g_node_insert;
    t.node_remove = g_node_remove;
    t.node_set_input = g_node_set_input;
    t.node_set_attr = g_node_set_attr;
    t.value_replace_uses = g_value_replace_uses;
    t.state_add = g_state_add;
    t.state_add_copy = g_state_add_copy;
    t.node_annotate = g_node_annotate;
    t.node_annotation = g_node_annotation;
    t.node_op_info = g_node_op_info;
    return t;
  }();
  return &api;
}

}  // namespace tandem::host
