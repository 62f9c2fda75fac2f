#include "program/streamed_layers.hpp"

#include <map>

#include "exec/tensor_text.hpp"
#include "lowering/zero_overlap.hpp"
#include "ops/op_table.hpp"

namespace tandem::host::program {
namespace {

// A repeated layer's copies ("h.3.fc") are layers of the spec themselves.
const model::LayerSpec* spec_of(const model::ModelSpec& spec, const std::string& layer) {
  for (const model::LayerSpec& l : spec.layers)
    if (l.name == layer) return &l;
  return nullptr;
}

bool persistent(const Value& v) {
  return (v.kind != TDM_VALUE_ACTIVATION || v.producer == kNoNode) && v.kind != TDM_VALUE_INPUT;
}

// A parameter's gradient and the update's tensors of its size; with ZeRO
// the update's of this rank's shard of it (its state and gradient shards,
// the whole gradient being transient in stage 2).
void add_companions(const lowering::ModelGraph& model, ValueId p, StreamableLayer& layer) {
  const Graph& g = model.graph;
  if (auto grad = model.gradients.find(p); grad != model.gradients.end()) {
    if (persistent(*g.value(grad->second))) layer.values.insert(g.value(grad->second)->name);
    for (NodeId id : g.consumers(grad->second))  // stage 2: the shard it is averaged into
      if (ops::host_kind(g.node(id)->op) == ops::HostKind::ZeroReduceScatter)
        layer.values.insert(g.value(lowering::zero_exchange_result(g, g.node(id)->outputs[0]))->name);
  }
  std::vector<ValueId> targets = {p};
  for (NodeId id : g.consumers(p))
    if (ops::host_kind(g.node(id)->op) == ops::HostKind::ZeroShard) targets.push_back(g.node(id)->outputs[0]);
  for (ValueId target : targets) {
    const size_t bytes = exec::tensor_bytes(g.value(target)->type);
    for (NodeId id : g.consumers(target)) {
      const Node& update = *g.node(id);
      if (!ops::is(update.op, ops::kOptimizer)) continue;
      for (ValueId in : update.inputs) {
        if (in == kNoValue) continue;
        const Value& v = *g.value(in);
        if (persistent(v) && exec::tensor_bytes(v.type) == bytes) layer.values.insert(v.name);
      }
    }
  }
}

}  // namespace

std::vector<StreamableLayer> streamable_layers(const lowering::ModelGraph& model,
                                               const model::ModelSpec& spec,
                                               const std::set<ValueId>& resident) {
  const Graph& g = model.graph;
  std::vector<StreamableLayer> layers;
  std::map<std::string, size_t> index;
  for (ValueId p : model.parameters) {
    const std::vector<NodeId> readers = g.consumers(p);
    if (readers.empty()) continue;
    const std::string& name = g.node(readers.front())->layer;
    const model::LayerSpec* l = spec_of(spec, name);
    if (l != nullptr && l->stream == false) continue;
    auto [at, added] = index.emplace(name, layers.size());
    if (added) layers.push_back({{}, 0, l != nullptr && l->stream == true});
    StreamableLayer& layer = layers[at->second];
    layer.values.insert(g.value(p)->name);
    add_companions(model, p, layer);
  }
  for (StreamableLayer& layer : layers) {
    std::erase_if(layer.values,
                  [&](const std::string& v) { return resident.count(g.value_by_name(v)->id) > 0; });
    for (const std::string& v : layer.values) layer.bytes += exec::tensor_bytes(g.value_by_name(v)->type);
  }
  return layers;
}

std::set<std::string> values_of(const std::vector<StreamableLayer>& layers) {
  std::set<std::string> out;
  for (const StreamableLayer& l : layers) out.insert(l.values.begin(), l.values.end());
  return out;
}

}  // namespace tandem::host::program
