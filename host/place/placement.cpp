#include "place/placement.hpp"

#include <algorithm>
#include <set>

#include "exec/tensor_text.hpp"
#include "ops/op_table.hpp"

namespace tandem::host::place {
namespace {

size_t bytes_of(const Value& v) {
  return exec::tensor_bytes(v.type);
}

class Placer {
 public:
  Placer(Graph& g, const model::ModelSpec& spec, const PlacementOptions& o) : g_(g), spec_(spec), o_(o) {}

  Result<Placement> run() {
    out_.devices.push_back(o_.default_device);
    for (const auto& layer : spec_.layers) {
      std::string device = o_.default_device;
      if (layer.device) {
        auto resolved = o_.resolve(*layer.device);
        if (!resolved)
          return make_error(spec_.path + ":" + std::to_string(layer.where.line) + ": layer '" + layer.name +
                                "': device '" + *layer.device + "': " + resolved.error().message,
                            resolved.error().status);
        device = *resolved;
        pinned_.insert(layer.name);
      } else if (auto chosen = o_.layer_devices.find(layer.name); chosen != o_.layer_devices.end()) {
        device = chosen->second;
      }
      layer_device_[layer.name] = device;
      use(device);
    }
    std::vector<NodeId> order;
    for (size_t i = 0; i < g_.node_count(); ++i) order.push_back(g_.node_at(i)->id);
    for (size_t i = 0; i < g_.value_count(); ++i)
      if (auto home = o_.homes.find(g_.value_at(i)->name); home != o_.homes.end()) {
        out_.home.emplace(g_.value_at(i)->id, home->second);
        use(home->second);
      }
    if (!o_.optimizer_device.empty()) {
      use(o_.optimizer_device);
      // What an update writes in place (the parameter, its moments) lives
      // with the optimizer, whoever reads it first.
      for (NodeId id : order)
        if (ops::is(g_.node(id)->op, ops::kOptimizer))
          for (const auto& [output, input] : ops::inplace_pairs(*g_.node(id)))
            out_.home.emplace(g_.node(id)->inputs[input], o_.optimizer_device);
    }
    // Decide every node's device first (schedule order: inputs are placed
    // before their readers), then bring tensors where they are read.
    for (NodeId id : order)
      if (auto r = place(*g_.node(id)); !r) return r.error();
    for (NodeId id : order)
      if (auto r = bring_inputs(id); !r) return r.error();
    // A device the layers could have gone to but none did is not part of the run.
    std::set<std::string> used;
    for (size_t i = 0; i < g_.node_count(); ++i) used.insert(g_.node_at(i)->device);
    for (const auto& [value, device] : out_.home) used.insert(device);
    std::erase_if(out_.devices, [&](const std::string& d) { return used.count(d) == 0; });
    return std::move(out_);
  }

 private:
  void use(const std::string& device) {
    if (std::find(out_.devices.begin(), out_.devices.end(), device) == out_.devices.end())
      out_.devices.push_back(device);
  }

  Result<void> place(const Node& n) {
    std::string device;
    if (!o_.optimizer_device.empty() && ops::is(n.op, ops::kOptimizer)) {
      device = o_.optimizer_device;
    } else if (auto it = layer_device_.find(n.layer); it != layer_device_.end()) {
      device = it->second;
    } else {
      for (ValueId v : n.inputs)
        if (auto h = out_.home.find(v); v != kNoValue && h != out_.home.end()) {
          device = h->second;
          break;
        }
      if (device.empty()) device = o_.default_device;
      // The rest of this group (the loss's gradient seed after the loss)
      // follows. Nodes of no layer (a feature's: grad_accum's accumulators)
      // are no group: each goes where its inputs are.
      if (!n.layer.empty()) layer_device_.emplace(n.layer, device);
    }
    if (auto r = g_.set_device(n.id, device); !r) return r;
    // Tensors without a producer live where they are first used.
    for (ValueId v : n.inputs)
      if (v != kNoValue && g_.value(v)->producer == kNoNode) out_.home.emplace(v, device);
    for (ValueId v : n.outputs) out_.home[v] = device;
    return {};
  }

  // An in-place update whose storage is a tensor without producer (state,
  // a parameter): its output is that tensor, rewritten every run.
  bool updates_state(const Node& n) const {
    for (const auto& [output, input] : ops::inplace_pairs(n))
      if (is_state(n.inputs[input])) return true;
    return false;
  }

  // `v` is a tensor without producer, or written in place into one.
  bool is_state(ValueId v) const {
    for (const Node* p = g_.node(g_.value(v)->producer); p != nullptr; p = g_.node(g_.value(v)->producer)) {
      const auto pairs = ops::inplace_pairs(*p);
      const auto through =
          std::find_if(pairs.begin(), pairs.end(), [&](const auto& q) { return p->outputs[q.first] == v; });
      if (through == pairs.end()) return false;
      v = p->inputs[through->second];
    }
    return true;
  }

  // An in-place update may write into a copy of `v` when nothing else
  // reads `v`: a result computed for it alone (ZeRO's shard of a
  // parameter, updated on the optimizer's device), not state that persists.
  bool writable_as_copy(ValueId v, NodeId writer) const {
    if (is_state(v)) return false;
    for (size_t i = 0; i < g_.node_count(); ++i) {
      const Node& n = *g_.node_at(i);
      if (n.id != writer && std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end()) return false;
    }
    return true;
  }

  // A backward result the optimizer phase reads: averaged across the
  // data-parallel ranks in between (PlacementOptions::averaged_gradients).
  bool averaged_later(const Node& producer, const Node& reader) const {
    return o_.averaged_gradients && producer.phase == TDM_PHASE_BACKWARD &&
           reader.phase == TDM_PHASE_OPTIMIZER;
  }

  std::string layer_of(ValueId v) const {
    const Value& value = *g_.value(v);
    if (const Node* p = g_.node(value.producer)) return p->layer;
    return value.name.substr(0, value.name.find('.'));
  }

  Result<void> bring_inputs(NodeId id) {
    const Node node = *g_.node(id);  // copy: inserting nodes may move the storage
    const auto written = ops::inplace_pairs(node);
    for (size_t slot = 0; slot < node.inputs.size(); ++slot) {
      const ValueId v = node.inputs[slot];
      if (v == kNoValue) continue;
      const std::string& home = out_.home.at(v);
      if (home == node.device) continue;
      const Value& value = *g_.value(v);
      const bool in_place =
          std::any_of(written.begin(), written.end(), [&](const auto& p) { return p.second == slot; });
      if (in_place && !writable_as_copy(v, id))
        return make_error("node '" + node.name + "' (layer '" + node.layer + "') on " + node.device +
                              " updates '" + value.name + "' in place, but it lives on " + home +
                              ": pin the layers that share it to one device",
                          TDM_INVALID_ARGUMENT);
      const std::string producer_layer = layer_of(v);
      // Scalars the host writes each step (learning rate, step count) go
      // wherever they are read, strict or not.
      const bool control_scalar = value.type.dims.empty() && value.producer == kNoNode;
      if (o_.strict && !control_scalar &&
          !(pinned_.count(producer_layer) > 0 && pinned_.count(node.layer) > 0))
        return make_error("placement = \"strict\": layer '" + node.layer + "' on " + node.device +
                              " reads '" + value.name + "' of layer '" + producer_layer + "' on " + home +
                              ", a copy the model file does not ask for; pin both layers to devices (a copy "
                              "between two pinned layers is allowed) or place them on one device",
                          TDM_INVALID_ARGUMENT);
      auto key = std::make_pair(v, node.device);
      auto it = copies_.find(key);
      if (it == copies_.end()) {
        NodeSpec spec;
        spec.op = ops::kDeviceCopy;
        spec.name = value.name + "@" + node.device;
        spec.layer = node.layer;
        spec.phase = node.phase;
        spec.inputs = {v};
        spec.outputs = {value.type};
        spec.output_names = {spec.name};
        // Right after its producer, so the copy can run while the producer's
        // device goes on (a gradient streams out during backward), in the
        // producer's phase; before the reader when the producer is an
        // in-place update of state (a gradient accumulator: copied once per
        // step, not once per micro-batch), has no producer at all, or is
        // averaged across ranks before the optimizer reads it.
        NodeId anchor = id;
        if (const Node* producer = g_.node(value.producer);
            producer != nullptr && !updates_state(*producer) && !averaged_later(*producer, node)) {
          const size_t after = *g_.position(producer->id) + 1;
          anchor = after < g_.node_count() ? g_.node_at(after)->id : id;
          spec.phase = producer->phase;
        }
        auto copy = g_.insert_node(std::move(spec), anchor);
        if (!copy) return copy.error();
        if (auto r = g_.set_device(*copy, node.device); !r) return r;
        const ValueId moved = g_.node(*copy)->outputs[0];
        out_.home[moved] = node.device;
        out_.copies.push_back({value.name, home, node.device, bytes_of(value), producer_layer, node.layer,
                               g_.node(*copy)->phase});
        it = copies_.emplace(key, moved).first;
      }
      if (auto r = g_.set_input(id, slot, it->second); !r) return r;
    }
    return {};
  }

  Graph& g_;
  const model::ModelSpec& spec_;
  const PlacementOptions& o_;
  Placement out_;
  std::map<std::string, std::string> layer_device_;
  std::set<std::string> pinned_;
  std::map<std::pair<ValueId, std::string>, ValueId> copies_;
};

}  // namespace

size_t Placement::copy_bytes() const {
  size_t total = 0;
  for (const Copy& c : copies) total += c.bytes;
  return total;
}

Result<Placement> place_layers(Graph& graph, const model::ModelSpec& spec, const PlacementOptions& options) {
  return Placer(graph, spec, options).run();
}

}  // namespace tandem::host::place
