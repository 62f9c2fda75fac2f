#include "exec/native_layouts.hpp"

#include <algorithm>

#include "exec/tensor_text.hpp"
#include "ops/op_table.hpp"
#include "plugin/optional_call.hpp"
#include "util/last_error.hpp"

namespace tandem::host::exec {
namespace {

bool transient(const Value& value) {
  return value.kind == TDM_VALUE_ACTIVATION && value.producer != kNoNode;
}

bool flag(const std::vector<uint8_t>& flags, size_t slot) {
  return slot < flags.size() && flags[slot] != 0;
}

}  // namespace

std::vector<uint8_t> LayoutPlan::node_layouts(const Node& node) const {
  std::vector<uint8_t> layouts;
  bool any = false;
  for (const auto* ids : {&node.inputs, &node.outputs})
    for (ValueId id : *ids) {
      const bool native_here = id != kNoValue && is_native(id);
      layouts.push_back(native_here ? TDM_LAYOUT_NATIVE : TDM_LAYOUT_PLAIN);
      any = any || native_here;
    }
  if (!any) layouts.clear();  // NULL on the wire: what a 1.2 host sends
  return layouts;
}

LayoutPlan decide_layouts(const Graph& graph, const std::set<ValueId>& outputs, const LayoutQuery& query) {
  // Candidates: every output slot its producer offers native.
  std::vector<NodeLayouts> answers(graph.node_count());
  std::map<ValueId, uint64_t> offered;
  for (size_t position = 0; position < graph.node_count(); ++position) {
    const Node& node = *graph.node_at(position);
    answers[position] = query(position, node);
    const NodeLayouts& a = answers[position];
    for (size_t slot = 0; slot < node.outputs.size(); ++slot) {
      const ValueId id = node.outputs[slot];
      const Value* value = id != kNoValue ? graph.value(id) : nullptr;
      if (value == nullptr || !flag(a.offers, slot) || !transient(*value) || outputs.count(id) > 0) continue;
      offered[id] = slot < a.native_bytes.size() ? a.native_bytes[slot] : 0;
    }
  }
  // Every reader must accept it; a value nobody reads stays plain (nothing
  // gains, and a host-side reader that did not say so still gets plain bytes).
  std::map<ValueId, bool> all_accept;
  for (size_t position = 0; position < graph.node_count(); ++position) {
    const Node& node = *graph.node_at(position);
    for (size_t slot = 0; slot < node.inputs.size(); ++slot) {
      const ValueId id = node.inputs[slot];
      if (offered.count(id) == 0) continue;
      auto [it, fresh] = all_accept.emplace(id, true);
      it->second = it->second && flag(answers[position].accepts, slot);
    }
  }
  LayoutPlan plan;
  for (const auto& [id, bytes] : offered) {
    auto it = all_accept.find(id);
    const uint64_t plain = tensor_bytes(graph.value(id)->type);
    if (it != all_accept.end() && it->second) plan.native[id] = std::max<uint64_t>(bytes, plain);
  }
  return plan;
}

LayoutPlan decide_layouts(const DeviceHandle& device, const Graph& graph, const std::set<ValueId>& outputs) {
  const LoadedPlugin& backend = device.backend();
  auto fn = TANDEM_OPTIONAL_FN(backend, backend, tdm_backend_api, kernel_layouts, 3);
  if (fn == nullptr) return {};  // no native layouts: all plain, nothing asked
  return decide_layouts(graph, outputs, [&](size_t, const Node& node) {
    NodeLayouts answer;
    if (ops::is(node.op, ops::kHostRun)) return answer;  // the host runs it: plain bytes
    auto spec = op_spec_of(graph, node);
    if (!spec) return answer;
    answer.accepts.assign(spec->inputs.size(), 0);
    answer.offers.assign(spec->outputs.size(), 0);
    answer.native_bytes.assign(spec->outputs.size(), 0);
    const OpDescC desc(backend, *spec);
    clear_last_error();
    if (fn(device.get(), &desc.desc, answer.accepts.data(), answer.offers.data(),
           answer.native_bytes.data()) != TDM_OK) {
      (void)take_last_error();  // "not here" is an answer, not an error
      return NodeLayouts{};
    }
    return answer;
  });
}

}  // namespace tandem::host::exec
