// checkpointing — the host's graph copied into plain C++ values at the start
// of the pass, so the rewrite can reason about it while inserting nodes
// (pointers the graph API hands out die at the next modification).
#pragma once

#include <tandem/tandem.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::checkpointing {

// One attribute, owned.
struct OwnedAttr {
  std::string name;
  tdm_attr_type type = TDM_ATTR_INT;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  tdm_attr view() const;  // valid while this object lives
};

struct NodeCopy {
  tdm_node_id id = -1;
  std::string op, name, layer;
  tdm_phase phase = TDM_PHASE_FORWARD;
  std::vector<tdm_value_id> inputs, outputs;
  std::vector<OwnedAttr> attrs;
  bool annotated_inplace = false;  // "tandem.inplace": overwrites an input
};

struct ValueCopy {
  tdm_value_id id = TDM_NO_VALUE;
  std::string name;
  tdm_value_kind kind = TDM_VALUE_ACTIVATION;
  tdm_dtype dtype = TDM_F32;
  std::vector<int64_t> dims;
  tdm_node_id producer = -1;
  size_t bytes() const;
  tdm_tensor_desc desc() const;  // valid while this object lives
};

struct GraphCopy {
  std::vector<NodeCopy> nodes;  // schedule order
  std::vector<ValueCopy> values;
  const ValueCopy& value(tdm_value_id id) const;
};

GraphCopy snapshot(const tdm_graph_api& api, const tdm_graph* graph);

// Throws tandem::Error naming `what` when `status` is not TDM_OK.
void check(tdm_status status, const std::string& what);

}  // namespace tandem::checkpointing
