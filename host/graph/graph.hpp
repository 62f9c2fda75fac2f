// The host graph IR: nodes (catalog ops) in schedule order, connected by
// values (tensors). Feature passes see it through the tdm_graph_api adapter
// (graph_api.hpp); autodiff, the planner and the executor will grow on it.
//
// Invariants every mutation keeps:
//   - ids are stable and never reused (a removed id stays dead);
//   - node names are unique, value names are unique;
//   - the schedule is topological: every input of a node is produced by an
//     earlier node or is a graph input / parameter / state value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tandem/graph.h"
#include "util/result.hpp"

namespace tandem::host {

using NodeId = tdm_node_id;
using ValueId = tdm_value_id;
inline constexpr NodeId kNoNode = -1;
inline constexpr ValueId kNoValue = TDM_NO_VALUE;

// An attribute owns its value; the variant index follows tdm_attr_type.
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;

struct Attr {
  std::string name;
  AttrValue value;
};

tdm_attr_type attr_type(const AttrValue& value);
// `a` as the ABI carries it; the result points into `a`, which must outlive it.
tdm_attr attr_to_c(const Attr& a);

struct Node {
  NodeId id = kNoNode;
  std::string op;
  std::string name;
  std::string layer;
  tdm_phase phase = TDM_PHASE_FORWARD;
  std::vector<Attr> attrs;
  std::vector<ValueId> inputs;  // kNoValue for an absent optional input
  std::vector<ValueId> outputs;
  std::map<std::string, std::string> annotations;
  std::string device;  // empty while unplaced
};

struct TensorType {
  tdm_dtype dtype = TDM_F32;
  std::vector<int64_t> dims;
};

struct Value {
  ValueId id = kNoValue;
  std::string name;
  tdm_value_kind kind = TDM_VALUE_ACTIVATION;
  TensorType type;
  NodeId producer = kNoNode;            // kNoNode for inputs, parameters, state
  std::optional<double> initial_value;  // fill value of state added by a pass
  // A state that starts as a copy of this persistent value (a parameter or
  // state), after initialisation or --init-from (Graph::add_state_copy).
  std::string copy_of;
};

struct NodeSpec {
  std::string op;
  std::string name;
  std::string layer;
  tdm_phase phase = TDM_PHASE_FORWARD;
  std::vector<Attr> attrs;
  std::vector<ValueId> inputs;
  std::vector<TensorType> outputs;
  std::vector<std::string> output_names;  // empty: "<node>:<i>"
};

class Graph {
 public:
  // Graph inputs, parameters and state: values without a producer.
  Result<ValueId> add_value(const std::string& name, tdm_value_kind kind, TensorType type);
  Result<ValueId> add_state(const std::string& name, TensorType type, double initial_value);
  // A state shaped like `source` (a parameter or state value) that starts as
  // a copy of it.
  Result<ValueId> add_state_copy(const std::string& name, ValueId source);
  // Inserts before `anchor` in the schedule, or appends when anchor is kNoNode.
  Result<NodeId> insert_node(NodeSpec spec, NodeId anchor = kNoNode);
  // Moves a node to just before `anchor` (kNoNode: the end of the
  // schedule); refused where it would read a value before its producer or
  // write one after a reader.
  Result<void> move_node(NodeId id, NodeId anchor);
  // Removes a node and its outputs; refused while an output is still read.
  Result<void> remove_node(NodeId id);
  Result<void> set_input(NodeId id, size_t index, ValueId value);
  Result<void> set_attr(NodeId id, Attr attr);
  // Every consumer of `from` except `except` reads `to` instead.
  Result<void> replace_uses(ValueId from, ValueId to, NodeId except);
  Result<void> annotate(NodeId id, const std::string& key, const std::optional<std::string>& value);
  Result<void> set_device(NodeId id, const std::string& device);
  // Marks a produced value as, e.g., a parameter's gradient (autodiff).
  Result<void> set_value_kind(ValueId id, tdm_value_kind kind);
  Result<void> rename_value(ValueId id, const std::string& name);

  size_t node_count() const noexcept { return schedule_.size(); }
  size_t value_count() const noexcept { return value_order_.size(); }
  const Node* node_at(size_t index) const;
  const Node* node(NodeId id) const;
  const Node* node_by_name(const std::string& name) const;
  const Value* value_at(size_t index) const;
  const Value* value(ValueId id) const;
  const Value* value_by_name(const std::string& name) const;
  // Schedule position of a live node.
  std::optional<size_t> position(NodeId id) const;
  // Nodes reading `value`, in schedule order.
  std::vector<NodeId> consumers(ValueId value) const;

  // Bumped by every successful modification; pointers into the graph handed
  // out through the C API are valid only while it is unchanged.
  uint64_t generation() const noexcept { return generation_; }

 private:
  Node* mutable_node(NodeId id);
  Result<void> check_readable(ValueId value, size_t reader_position, const std::string& reader) const;
  bool reaches(NodeId from, NodeId to) const;
  void touch() noexcept { ++generation_; }

  std::map<NodeId, Node> nodes_;
  std::map<ValueId, Value> values_;
  std::vector<NodeId> schedule_;
  std::vector<ValueId> value_order_;
  std::map<std::string, NodeId> node_names_;
  std::map<std::string, ValueId> value_names_;
  NodeId next_node_ = 0;
  ValueId next_value_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace tandem::host
