#include "graph/graph.hpp"

#include <algorithm>
#include <set>

namespace tandem::host {
namespace {
Error invalid(std::string message) {
  return make_error(std::move(message), TDM_INVALID_ARGUMENT);
}
}  // namespace

tdm_attr_type attr_type(const AttrValue& value) {
  switch (value.index()) {
    case 0:
      return TDM_ATTR_INT;
    case 1:
      return TDM_ATTR_FLOAT;
    case 2:
      return TDM_ATTR_STRING;
    case 3:
      return TDM_ATTR_INTS;
    default:
      return TDM_ATTR_FLOATS;
  }
}

tdm_attr attr_to_c(const Attr& a) {
  tdm_attr out{};
  out.struct_size = sizeof out;
  out.name = a.name.c_str();
  out.type = attr_type(a.value);
  if (const auto* i = std::get_if<int64_t>(&a.value)) out.i = *i;
  if (const auto* f = std::get_if<double>(&a.value)) out.f = *f;
  if (const auto* s = std::get_if<std::string>(&a.value)) out.s = s->c_str();
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&a.value)) {
    out.ints = ints->data();
    out.count = ints->size();
  }
  if (const auto* floats = std::get_if<std::vector<double>>(&a.value)) {
    out.floats = floats->data();
    out.count = floats->size();
  }
  return out;
}

Result<ValueId> Graph::add_value(const std::string& name, tdm_value_kind kind, TensorType type) {
  if (name.empty()) return invalid("a value needs a name");
  if (value_names_.count(name) != 0)
    return invalid("a value named '" + name + "' already exists in the graph");
  Value v;
  v.id = next_value_++;
  v.name = name;
  v.kind = kind;
  v.type = std::move(type);
  value_names_[name] = v.id;
  value_order_.push_back(v.id);
  ValueId id = v.id;
  values_.emplace(id, std::move(v));
  touch();
  return id;
}

Result<ValueId> Graph::add_state(const std::string& name, TensorType type, double initial_value) {
  Result<ValueId> id = add_value(name, TDM_VALUE_STATE, std::move(type));
  if (id) values_.at(*id).initial_value = initial_value;
  return id;
}

Result<ValueId> Graph::add_state_copy(const std::string& name, ValueId source) {
  const Value* from = value(source);
  if (from == nullptr)
    return invalid("state '" + name + "' would copy unknown value id " + std::to_string(source));
  if (from->kind != TDM_VALUE_PARAMETER && from->kind != TDM_VALUE_STATE)
    return invalid(
        "state '" + name + "' would copy '" + from->name +
        "', which is not a parameter or state value: only they hold contents before the first step");
  const std::string copied = from->name;
  Result<ValueId> id = add_value(name, TDM_VALUE_STATE, from->type);
  if (id) values_.at(*id).copy_of = copied;
  return id;
}

Result<void> Graph::check_readable(ValueId value, size_t reader_position, const std::string& reader) const {
  if (value == kNoValue) return {};
  const Value* v = this->value(value);
  if (v == nullptr) return invalid("node '" + reader + "' reads unknown value id " + std::to_string(value));
  if (v->producer == kNoNode) return {};
  std::optional<size_t> producer_position = position(v->producer);
  if (producer_position && *producer_position < reader_position) return {};
  return invalid("node '" + reader + "' would read value '" + v->name + "' before its producer '" +
                 node(v->producer)->name + "' runs; place the reader after the producer in the schedule");
}

Result<NodeId> Graph::insert_node(NodeSpec spec, NodeId anchor) {
  if (spec.name.empty()) return invalid("a node needs a name (op '" + spec.op + "')");
  if (spec.op.empty()) return invalid("node '" + spec.name + "' needs an op");
  if (node_names_.count(spec.name) != 0)
    return invalid("a node named '" + spec.name + "' already exists in the graph; node names must be unique");
  size_t insert_at = schedule_.size();
  if (anchor != kNoNode) {
    std::optional<size_t> p = position(anchor);
    if (!p)
      return invalid("node '" + spec.name + "' is anchored before unknown node id " + std::to_string(anchor));
    insert_at = *p;
    if (spec.layer.empty()) spec.layer = node(anchor)->layer;
  }
  for (ValueId input : spec.inputs) {
    Result<void> ok = check_readable(input, insert_at, spec.name);
    if (!ok) return ok.error();
  }
  std::vector<std::string> out_names;
  std::set<std::string> fresh;
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    std::string n = i < spec.output_names.size() && !spec.output_names[i].empty()
                        ? spec.output_names[i]
                        : spec.name + ":" + std::to_string(i);
    if (value_names_.count(n) != 0 || !fresh.insert(n).second)
      return invalid("output '" + n + "' of node '" + spec.name + "' duplicates an existing value name");
    out_names.push_back(std::move(n));
  }

  Node node;
  node.id = next_node_++;
  node.op = std::move(spec.op);
  node.name = std::move(spec.name);
  node.layer = std::move(spec.layer);
  node.phase = spec.phase;
  node.attrs = std::move(spec.attrs);
  node.inputs = std::move(spec.inputs);
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    Value v;
    v.id = next_value_++;
    v.name = out_names[i];
    v.kind = TDM_VALUE_ACTIVATION;
    v.type = std::move(spec.outputs[i]);
    v.producer = node.id;
    value_names_[v.name] = v.id;
    value_order_.push_back(v.id);
    node.outputs.push_back(v.id);
    values_.emplace(v.id, std::move(v));
  }
  NodeId id = node.id;
  node_names_[node.name] = id;
  nodes_.emplace(id, std::move(node));
  schedule_.insert(schedule_.begin() + static_cast<std::ptrdiff_t>(insert_at), id);
  touch();
  return id;
}

Result<void> Graph::move_node(NodeId id, NodeId anchor) {
  const Node* n = node(id);
  if (n == nullptr) return invalid("cannot move unknown node id " + std::to_string(id));
  if (anchor == id) return {};
  std::vector<NodeId> schedule = schedule_;
  schedule.erase(std::find(schedule.begin(), schedule.end(), id));
  auto at = schedule.end();
  if (anchor != kNoNode) {
    at = std::find(schedule.begin(), schedule.end(), anchor);
    if (at == schedule.end())
      return invalid("node '" + n->name + "' cannot move before unknown node id " + std::to_string(anchor));
  }
  const size_t to = static_cast<size_t>(at - schedule.begin());
  schedule.insert(at, id);
  auto place = [&](NodeId of) {
    return static_cast<size_t>(std::find(schedule.begin(), schedule.end(), of) - schedule.begin());
  };
  for (ValueId input : n->inputs) {
    const Value* v = value(input);
    if (v != nullptr && v->producer != kNoNode && place(v->producer) > to)
      return invalid("node '" + n->name + "' cannot move before '" + node(v->producer)->name +
                     "', which produces its input '" + v->name + "'");
  }
  for (ValueId out : n->outputs)
    for (NodeId reader : consumers(out))
      if (place(reader) < to)
        return invalid("node '" + n->name + "' cannot move after '" + node(reader)->name +
                       "', which reads its output '" + value(out)->name + "'");
  schedule_ = std::move(schedule);
  touch();
  return {};
}

Result<void> Graph::remove_node(NodeId id) {
  const Node* n = node(id);
  if (n == nullptr) return invalid("cannot remove unknown node id " + std::to_string(id));
  for (ValueId out : n->outputs) {
    std::vector<NodeId> readers = consumers(out);
    if (!readers.empty())
      return invalid("cannot remove node '" + n->name + "': its output '" + value(out)->name +
                     "' is still read by '" + node(readers.front())->name +
                     "'; redirect its uses first (value_replace_uses)");
  }
  for (ValueId out : n->outputs) {
    value_names_.erase(values_.at(out).name);
    value_order_.erase(std::find(value_order_.begin(), value_order_.end(), out));
    values_.erase(out);
  }
  schedule_.erase(std::find(schedule_.begin(), schedule_.end(), id));
  node_names_.erase(n->name);
  nodes_.erase(id);
  touch();
  return {};
}

Result<void> Graph::set_input(NodeId id, size_t index, ValueId value) {
  Node* n = mutable_node(id);
  if (n == nullptr) return invalid("cannot set an input of unknown node id " + std::to_string(id));
  if (index >= n->inputs.size())
    return invalid("node '" + n->name + "' has " + std::to_string(n->inputs.size()) + " inputs; index " +
                   std::to_string(index) + " is out of range");
  if (value != kNoValue) {
    const Value* v = this->value(value);
    if (v == nullptr)
      return invalid("node '" + n->name + "' cannot read unknown value id " + std::to_string(value));
    if (v->producer != kNoNode && (v->producer == id || reaches(id, v->producer)))
      return invalid("reading '" + v->name + "' in node '" + n->name + "' would make the graph cyclic");
    Result<void> ok = check_readable(value, *position(id), n->name);
    if (!ok) return ok;
  }
  n->inputs[index] = value;
  touch();
  return {};
}

Result<void> Graph::set_attr(NodeId id, Attr attr) {
  Node* n = mutable_node(id);
  if (n == nullptr) return invalid("cannot set an attribute of unknown node id " + std::to_string(id));
  if (attr.name.empty()) return invalid("an attribute of node '" + n->name + "' needs a name");
  auto it =
      std::find_if(n->attrs.begin(), n->attrs.end(), [&](const Attr& a) { return a.name == attr.name; });
  if (it != n->attrs.end())
    *it = std::move(attr);
  else
    n->attrs.push_back(std::move(attr));
  touch();
  return {};
}

Result<void> Graph::replace_uses(ValueId from, ValueId to, NodeId except) {
  const Value* f = value(from);
  const Value* t = value(to);
  if (f == nullptr) return invalid("cannot replace uses of unknown value id " + std::to_string(from));
  if (t == nullptr)
    return invalid("cannot replace uses of '" + f->name + "' by unknown value id " + std::to_string(to));
  if (except != kNoNode && node(except) == nullptr)
    return invalid("unknown node id " + std::to_string(except) + " given as the exception");
  std::vector<NodeId> readers = consumers(from);
  // Validate every reader first so a refused change leaves the graph intact.
  for (NodeId r : readers) {
    if (r == except) continue;
    if (t->producer != kNoNode && (t->producer == r || reaches(r, t->producer)))
      return invalid("replacing '" + f->name + "' by '" + t->name + "' in node '" + node(r)->name +
                     "' would make the graph cyclic");
    Result<void> ok = check_readable(to, *position(r), node(r)->name);
    if (!ok) return ok;
  }
  for (NodeId r : readers) {
    if (r == except) continue;
    for (ValueId& in : mutable_node(r)->inputs)
      if (in == from) in = to;
  }
  touch();
  return {};
}

Result<void> Graph::annotate(NodeId id, const std::string& key, const std::optional<std::string>& value) {
  Node* n = mutable_node(id);
  if (n == nullptr) return invalid("cannot annotate unknown node id " + std::to_string(id));
  if (key.empty()) return invalid("an annotation of node '" + n->name + "' needs a key");
  if (value)
    n->annotations[key] = *value;
  else
    n->annotations.erase(key);
  touch();
  return {};
}

Result<void> Graph::set_device(NodeId id, const std::string& device) {
  Node* n = mutable_node(id);
  if (n == nullptr) return invalid("cannot place unknown node id " + std::to_string(id));
  n->device = device;
  touch();
  return {};
}

Result<void> Graph::set_value_kind(ValueId id, tdm_value_kind kind) {
  auto it = values_.find(id);
  if (it == values_.end()) return invalid("cannot change the kind of unknown value id " + std::to_string(id));
  it->second.kind = kind;
  touch();
  return {};
}

Result<void> Graph::rename_value(ValueId id, const std::string& name) {
  auto it = values_.find(id);
  if (it == values_.end()) return invalid("cannot rename unknown value id " + std::to_string(id));
  if (it->second.name == name) return {};
  if (value_names_.count(name) > 0) return invalid("a value named '" + name + "' already exists");
  value_names_.erase(it->second.name);
  value_names_[name] = id;
  it->second.name = name;
  touch();
  return {};
}

const Node* Graph::node_at(size_t index) const {
  return index < schedule_.size() ? node(schedule_[index]) : nullptr;
}

const Node* Graph::node(NodeId id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

Node* Graph::mutable_node(NodeId id) {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

const Node* Graph::node_by_name(const std::string& name) const {
  auto it = node_names_.find(name);
  return it == node_names_.end() ? nullptr : node(it->second);
}

const Value* Graph::value_at(size_t index) const {
  return index < value_order_.size() ? value(value_order_[index]) : nullptr;
}

const Value* Graph::value(ValueId id) const {
  auto it = values_.find(id);
  return it == values_.end() ? nullptr : &it->second;
}

const Value* Graph::value_by_name(const std::string& name) const {
  auto it = value_names_.find(name);
  return it == value_names_.end() ? nullptr : value(it->second);
}

// Linear scan: passes run once per training run on graphs of thousands of
// nodes at most. Index it when a hot path needs it.
std::optional<size_t> Graph::position(NodeId id) const {
  auto it = std::find(schedule_.begin(), schedule_.end(), id);
  if (it == schedule_.end()) return std::nullopt;
  return static_cast<size_t>(it - schedule_.begin());
}

std::vector<NodeId> Graph::consumers(ValueId value) const {
  std::vector<NodeId> out;
  for (NodeId id : schedule_) {
    const Node& n = nodes_.at(id);
    if (std::find(n.inputs.begin(), n.inputs.end(), value) != n.inputs.end()) out.push_back(id);
  }
  return out;
}

// True when `to` depends, directly or transitively, on an output of `from`.
bool Graph::reaches(NodeId from, NodeId to) const {
  std::vector<NodeId> stack{from};
  std::set<NodeId> seen;
  while (!stack.empty()) {
    NodeId cur = stack.back();
    stack.pop_back();
    if (!seen.insert(cur).second) continue;
    for (ValueId out : nodes_.at(cur).outputs)
      for (NodeId reader : consumers(out)) {
        if (reader == to) return true;
        stack.push_back(reader);
      }
  }
  return false;
}

}  // namespace tandem::host
