// Thin C++ wrappers over the host's graph table (tdm_graph_api) for the amp
// passes. Everything returned is copied out of the host's storage, because
// the host's strings and arrays die at the next modification of the graph.
#pragma once

#include <tandem/tandem.hpp>

#include <string>
#include <vector>

namespace amp {

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
};

class GraphEdit {
 public:
  explicit GraphEdit(tdm_graph* graph) : graph_(graph), g_(*tandem::Host::api()->graph) {}

  std::vector<NodeView> nodes() const;  // schedule order
  NodeView node(tdm_node_id id) const;
  ValueView value(tdm_value_id id) const;
  std::vector<ValueView> values() const;
  std::vector<OwnedAttr> attrs(tdm_node_id id, size_t n_attrs) const;
  std::vector<OwnedAttr> attrs(tdm_node_id id) const;
  const char* annotation(tdm_node_id id, const char* key) const {
    return g_.node_annotation(graph_, id, key);
  }
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
  void annotate(tdm_node_id id, const char* key, const char* value);
  // A node name not yet used in the graph, starting from `base`.
  std::string fresh_name(const std::string& base) const;

 private:
  tdm_graph* graph_;
  const tdm_graph_api& g_;
};

}  // namespace amp
