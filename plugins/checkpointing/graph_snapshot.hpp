// checkpointing — the host's graph copied into plain C++ values at the start
// of the pass (the SDK's tandem::GraphEdit views plus what the rewrite
// needs: attributes, the in-place annotation and what kind of op each is), so the rewrite can reason
// about it while inserting nodes.
#pragma once

#include <tandem/graph_edit.hpp>

#include <string>
#include <vector>

namespace tandem::checkpointing {

struct NodeCopy : NodeView {
  std::vector<OwnedAttr> attrs;
  bool annotated_inplace = false;  // "tandem.inplace": overwrites an input
  OpKind kind;                     // what its op is (node_op_info)
};

struct ValueCopy : ValueView {
  size_t bytes() const;
  tdm_tensor_desc desc() const;  // valid while this object lives
};

struct GraphCopy {
  std::vector<NodeCopy> nodes;  // schedule order
  std::vector<ValueCopy> values;
  const ValueCopy& value(tdm_value_id id) const;
};

GraphCopy snapshot(const GraphEdit& graph);

}  // namespace tandem::checkpointing
