#include "recompute.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace tandem::checkpointing {
namespace {

bool recomputable(const NodeCopy& n) {
  return n.op != "batch_norm_train" && !n.annotated_inplace && n.op.rfind("comm.", 0) != 0;
}

struct Use {
  size_t node;  // index into GraphCopy::nodes
  size_t slot;
};

}  // namespace

RewriteStats recompute(const tdm_graph_api& api, tdm_graph* graph, const GraphCopy& copy,
                       const Segments& segments) {
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
      std::vector<tdm_value_id> inputs;
      for (tdm_value_id in : n.inputs) inputs.push_back(replacement.count(in) > 0 ? replacement[in] : in);
      std::vector<tdm_attr> attrs;
      for (const OwnedAttr& a : n.attrs) attrs.push_back(a.view());
      std::vector<tdm_tensor_desc> outputs;
      for (tdm_value_id out : n.outputs) outputs.push_back(copy.value(out).desc());
      const std::string name = n.name + ".recompute";
      tdm_node_spec spec{};
      spec.struct_size = sizeof spec;
      spec.op = n.op.c_str();
      spec.name = name.c_str();
      spec.layer = n.layer.c_str();
      spec.phase = TDM_PHASE_BACKWARD;
      spec.attrs = attrs.data();
      spec.n_attrs = attrs.size();
      spec.inputs = inputs.data();
      spec.n_inputs = inputs.size();
      spec.outputs = outputs.data();
      spec.n_outputs = outputs.size();
      spec.anchor = copy.nodes[anchor].id;
      tdm_node_id id = -1;
      check(api.node_insert(graph, &spec, &id), "inserting " + name);
      check(api.node_annotate(graph, id, "checkpointing.segment", segment.c_str()), "annotating " + name);
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        tdm_value_id out = TDM_NO_VALUE;
        check(api.node_output(graph, id, k, &out), "node_output");
        replacement[n.outputs[k]] = out;
      }
      ++stats.cloned_nodes;
    }
    for (tdm_value_id v : recomputed) {
      for (const Use& u : uses[v])
        if (copy.nodes[u.node].phase == TDM_PHASE_BACKWARD)
          check(api.node_set_input(graph, copy.nodes[u.node].id, u.slot, replacement.at(v)),
                "redirecting " + copy.nodes[u.node].name + " to the recomputed " + copy.value(v).name);
      stats.freed_bytes += copy.value(v).bytes();
    }
    ++stats.recomputed_segments;
  }
  return stats;
}

}  // namespace tandem::checkpointing
