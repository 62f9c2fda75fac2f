#include "place/split.hpp"

namespace tandem::host::place {
namespace {

Result<ValueId> local_value(DeviceGraph& d, const Graph& g, ValueId v) {
  if (auto it = d.local_of.find(v); it != d.local_of.end()) return it->second;
  const Value& value = *g.value(v);
  const Node* producer = g.node(value.producer);
  Result<ValueId> id = make_error("", TDM_INTERNAL);
  if (value.kind == TDM_VALUE_STATE) {
    id = d.graph.add_state(value.name, value.type, value.initial_value.value_or(0.0));
  } else if (value.kind == TDM_VALUE_PARAMETER || producer == nullptr) {
    id = d.graph.add_value(value.name, value.kind, value.type);
  } else if (producer->op == kDeviceCopy) {
    id = d.graph.add_value(value.name, TDM_VALUE_INPUT, value.type);  // written by the copy
  } else {
    return make_error("value '" + value.name + "' is read on " + d.device + " before its producer '" +
                          producer->name + "' ran there (internal: placement left a cross-device read)",
                      TDM_INTERNAL);
  }
  if (!id) return id;
  d.local_of[v] = *id;
  return id;
}

}  // namespace

Result<SplitGraph> split_by_device(const Graph& g, const Placement& placement) {
  SplitGraph out;
  std::map<std::string, size_t> index;
  for (const std::string& device : placement.devices) {
    index[device] = out.devices.size();
    out.devices.push_back(DeviceGraph{device, {}, {}, {}, {}});
  }
  for (size_t pos = 0; pos < g.node_count(); ++pos) {
    const Node& n = *g.node_at(pos);
    if (n.op == kDeviceCopy) {
      const std::string& from = placement.home.at(n.inputs[0]);
      DeviceGraph& source = out.devices[index.at(from)];
      // A tensor that lives on a device nothing there reads (a parameter
      // kept with an offloaded optimizer, during evaluation) is still held there.
      if (auto held = local_value(source, g, n.inputs[0]); !held) return held.error();
      source.exported.insert(g.value(n.inputs[0])->name);
      out.transfers.push_back({pos, g.value(n.inputs[0])->name, from, n.device});
      continue;
    }
    DeviceGraph& d = out.devices[index.at(n.device)];
    NodeSpec spec;
    spec.op = n.op;
    spec.name = n.name;
    spec.layer = n.layer;
    spec.phase = n.phase;
    spec.attrs = n.attrs;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) {
        spec.inputs.push_back(kNoValue);
        continue;
      }
      auto local = local_value(d, g, v);
      if (!local) return local.error();
      spec.inputs.push_back(*local);
    }
    for (ValueId v : n.outputs) {
      spec.outputs.push_back(g.value(v)->type);
      spec.output_names.push_back(g.value(v)->name);
    }
    auto id = d.graph.insert_node(std::move(spec));
    if (!id) return id.error();
    if (auto r = d.graph.set_device(*id, n.device); !r) return r.error();
    for (const auto& [key, value] : n.annotations)
      if (auto r = d.graph.annotate(*id, key, value); !r) return r.error();
    const Node& local = *d.graph.node(*id);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      d.local_of[n.outputs[k]] = local.outputs[k];
      const tdm_value_kind kind = g.value(n.outputs[k])->kind;
      if (kind != TDM_VALUE_ACTIVATION)
        if (auto r = d.graph.set_value_kind(local.outputs[k], kind); !r) return r.error();
    }
    d.positions.push_back(pos);
  }
  return out;
}

}  // namespace tandem::host::place
