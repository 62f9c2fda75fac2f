#include "recompute.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace tandem::checkpointing {
namespace {

// Not run twice: an op that updates persistent state (batch_norm_train's
// running statistics), one a pass made overwrite its input, and a
// collective (the other ranks would have to take part again).
bool recomputable(const NodeCopy& n) {
  return !n.kind.is(TDM_OP_UPDATES_STATE) && !n.kind.is(TDM_OP_COLLECTIVE) && !n.annotated_inplace;
}

struct Use {
  size_t node;  // index into GraphCopy::nodes
  size_t slot;
};

}  // namespace

RewriteStats recompute(GraphEdit& graph, const GraphCopy& copy, const Segments& segments) {
  std::map<tdm_value_id, std::vector<Use>> uses;
  for (size_t i = 0; i < copy.nodes.size(); ++i)
    for (size_t k = 0; k < copy.nodes[i].inputs.size(); ++k) uses[copy.nodes[i].inputs[k]].push_back({i, k});

  RewriteStats stats;
  for (size_t s = 0; s + 1 < segments.size(); ++s) {
    const std::set<std::string> layers(segments[s].begin(), segments[s].end());
    std::vector<size_t> members;  // the segment's forward nodes, schedule order
    std::map<tdm_value_id, size_t> producer;
    for (size_t i = 0; i < copy.nodes.size(); ++i) {
      const NodeCopy& n = copy.nodes[i];
      if (n.phase != TDM_PHASE_FORWARD || layers.count(n.layer) == 0) continue;
      members.push_back(i);
      for (tdm_value_id v : n.outputs) producer[v] = i;
    }
    // Kept: outputs of nodes that must not run twice, and whatever forward
    // reads outside the segment (the checkpoint, skip connections).
    const auto kept = [&](tdm_value_id v) {
      if (!recomputable(copy.nodes[producer.at(v)])) return true;
      for (const Use& u : uses[v])
        if (copy.nodes[u.node].phase == TDM_PHASE_FORWARD && layers.count(copy.nodes[u.node].layer) == 0)
          return true;
      return false;
    };
    std::set<tdm_value_id> recomputed;
    size_t anchor = copy.nodes.size();
    for (const auto& [v, p] : producer) {
      if (kept(v)) continue;
      for (const Use& u : uses[v])
        if (copy.nodes[u.node].phase == TDM_PHASE_BACKWARD) {
          recomputed.insert(v);
          anchor = std::min(anchor, u.node);
        }
    }
    if (recomputed.empty()) continue;
    // The members that recompute those values, back to kept values and
    // values from outside the segment.
    std::set<tdm_value_id> needed = recomputed;
    std::set<size_t> clone;
    for (auto it = members.rbegin(); it != members.rend(); ++it) {
      const NodeCopy& n = copy.nodes[*it];
      const bool wanted = std::any_of(n.outputs.begin(), n.outputs.end(),
                                      [&](tdm_value_id v) { return needed.count(v) > 0; });
      if (!wanted) continue;
      clone.insert(*it);
      for (tdm_value_id in : n.inputs)
        if (in != TDM_NO_VALUE && producer.count(in) > 0 && !kept(in)) needed.insert(in);
    }
    std::map<tdm_value_id, tdm_value_id> replacement;
    const std::string segment = std::to_string(s);
    for (size_t i : members) {
      if (clone.count(i) == 0) continue;
      const NodeCopy& n = copy.nodes[i];
      GraphEdit::Spec spec;
      spec.op = n.op;
      spec.name = n.name + ".recompute";
      spec.layer = n.layer;
      spec.phase = TDM_PHASE_BACKWARD;
      spec.attrs = n.attrs;
      for (tdm_value_id in : n.inputs)
        spec.inputs.push_back(replacement.count(in) > 0 ? replacement[in] : in);
      for (tdm_value_id out : n.outputs) spec.outputs.push_back(copy.value(out));
      spec.anchor = copy.nodes[anchor].id;
      const tdm_node_id id = graph.insert(spec);
      graph.annotate(id, "checkpointing.segment", segment.c_str());
      for (size_t k = 0; k < n.outputs.size(); ++k) replacement[n.outputs[k]] = graph.output(id, k);
      ++stats.cloned_nodes;
    }
    for (tdm_value_id v : recomputed) {
      for (const Use& u : uses[v])
        if (copy.nodes[u.node].phase == TDM_PHASE_BACKWARD)
          graph.set_input(copy.nodes[u.node].id, u.slot, replacement.at(v));
      stats.freed_bytes += copy.value(v).bytes();
    }
    ++stats.recomputed_segments;
  }
  return stats;
}

}  // namespace tandem::checkpointing
