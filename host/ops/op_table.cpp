#include "ops/op_table.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "ops/rules.hpp"
#include "tandem/op_catalog.hpp"
#include "tandem/op_shapes.hpp"

namespace tandem::host::ops {
namespace {

// A catalog op's slots, in-place pairs, flags and gradient ops, from the
// SDK's catalog; every catalog op must have the host's part and every
// entry that is not host-run must be a catalog op (the ggml-style guard
// that keeps the two from drifting: the table does not build otherwise).
void complete_from_catalog(std::vector<OpInfo>& all) {
  std::set<std::string_view> covered;
  for (OpInfo& info : all) {
    const catalog::Op* op = catalog::find(info.name);
    if (op == nullptr) {
      if (!info.is(kHostRun))
        throw std::logic_error("host/ops: '" + std::string(info.name) + "' is not in the SDK's op catalog");
      continue;
    }
    covered.insert(info.name);
    info.section = op->section;
    info.inputs.clear();
    info.outputs.clear();
    for (const catalog::Operand& o : op->inputs) info.inputs.push_back({o.name, o.optional});
    for (const catalog::Operand& o : op->outputs) info.outputs.push_back({o.name, o.optional});
    for (const catalog::InplacePair& p : op->inplace)
      info.inplace.push_back({.out = p.out, .in = p.in, .always = p.always, .reuse = p.reuse});
    info.flags = op->flags;
    info.grad_ops.assign(op->grad_ops.begin(), op->grad_ops.end());
  }
  for (const catalog::Op& op : catalog::ops()) {
    if (covered.count(op.name) == 0)
      throw std::logic_error("host/ops: catalog op '" + op.name + "' has no host entry (host/ops/" +
                             op.section + ".cpp)");
    if (shapes::rule(op.name) == nullptr)
      throw std::logic_error("host/ops: catalog op '" + op.name + "' has no shape rule in the SDK (" +
                             "tandem/op_shapes.hpp)");
  }
}

// A catalog op's outputs by the SDK's rule (tandem/op_shapes.hpp), the one
// every backend's kit checks too.
Result<std::vector<TensorType>> catalog_shape(const catalog::Op& op, const ShapeQuery& q) {
  std::vector<TensorShape> inputs, declared;
  inputs.reserve(q.inputs.size());
  for (const auto& in : q.inputs)
    inputs.push_back(in ? TensorShape(in->dtype, in->dims) : TensorShape(TDM_DTYPE_INVALID, {}));
  std::vector<const TensorShape*> present;
  for (size_t i = 0; i < inputs.size(); ++i) present.push_back(q.inputs[i] ? &inputs[i] : nullptr);
  for (const TensorType& t : q.declared) declared.emplace_back(t.dtype, t.dims);
  std::vector<tdm_attr> attrs;
  for (const Attr& a : *q.attrs) attrs.push_back(attr_to_c(a));
  try {
    const shapes::Outputs outs =
        shapes::infer(shapes::Query(op, std::move(present), attrs.data(), attrs.size(), declared));
    std::vector<TensorType> types;
    for (const TensorShape& t : outs) types.push_back({t.dtype, t.dims});
    return types;
  } catch (const shapes::Invalid& e) {
    return make_error(e.what(), TDM_INVALID_ARGUMENT);
  }
}

// The families in catalog order. An explicit list rather than
// self-registering statics: a static library drops object files nothing
// references, and a family would vanish without a word.
std::vector<OpInfo> build_table() {
  std::vector<OpInfo> all;
  for (auto family : {matmul_ops,
                      linear_ops,
                      conv2d_ops,
                      pooling_ops,
                      activation_ops,
                      softmax_ops,
                      softmax_cross_entropy_ops,
                      layer_norm_ops,
                      batch_norm_ops,
                      embedding_ops,
                      dropout_ops,
                      elementwise_ops,
                      reduce_ops,
                      tensor_ops,
                      cast_ops,
                      sgd_update_ops,
                      adamw_update_ops,
                      quantize_ops,
                      linear_int8_ops,
                      conv2d_int8_ops,
                      fake_quant_ops,
                      rms_norm_ops,
                      rope_ops,
                      attention_ops,
                      host_run_ops})
    for (OpInfo& info : family()) all.push_back(std::move(info));
  complete_from_catalog(all);
  return all;
}

struct Table {
  std::vector<OpInfo> ops = build_table();
  std::map<std::string_view, const OpInfo*> by_name = [this] {
    std::map<std::string_view, const OpInfo*> m;
    for (const OpInfo& info : ops) m.emplace(info.name, &info);
    return m;
  }();
};

const Table& table() {
  static const Table t;
  return t;
}

// "out:in[,out:in...]" from a pass's "tandem.inplace" annotation.
std::vector<std::pair<size_t, size_t>> requested_pairs(const Node& node) {
  std::vector<std::pair<size_t, size_t>> pairs;
  auto it = node.annotations.find("tandem.inplace");
  if (it == node.annotations.end()) return pairs;
  std::stringstream list(it->second);
  for (std::string item; std::getline(list, item, ',');) {
    size_t out = 0, in = 0;
    if (std::sscanf(item.c_str(), "%zu:%zu", &out, &in) == 2) pairs.emplace_back(out, in);
  }
  return pairs;
}

bool slot_present(const std::vector<ValueId>& slots, size_t i) {
  return i < slots.size() && slots[i] != kNoValue;
}

}  // namespace

std::span<const OpInfo> op_table() {
  return table().ops;
}

const OpInfo* find(std::string_view op) {
  const auto& m = table().by_name;
  const auto it = m.find(op);
  return it == m.end() ? nullptr : it->second;
}

bool is(std::string_view op, Flag flag) {
  const OpInfo* info = find(op);
  return info != nullptr && info->is(flag);
}

HostKind host_kind(std::string_view op) {
  const OpInfo* info = find(op);
  return info != nullptr ? info->host : HostKind::None;
}

std::vector<std::pair<size_t, size_t>> inplace_pairs(const Node& node) {
  std::vector<std::pair<size_t, size_t>> pairs;
  const OpInfo* info = find(node.op);
  const auto usable = [&](size_t out, size_t in) {
    return slot_present(node.outputs, out) && slot_present(node.inputs, in);
  };
  if (info != nullptr)
    for (const InplacePair& p : info->inplace)
      if (p.always && usable(p.out, p.in)) pairs.emplace_back(p.out, p.in);
  // A pass may ask for a binding the catalog allows (e.g. `add` accumulating
  // into a state). Ops outside the table are a plugin's own: its request is
  // taken at its word.
  for (auto [out, in] : requested_pairs(node)) {
    if (!usable(out, in)) continue;
    bool allowed = info == nullptr;
    if (info != nullptr)
      for (const InplacePair& p : info->inplace) allowed |= p.out == out && p.in == in;
    if (allowed) pairs.emplace_back(out, in);
  }
  return pairs;
}

Result<void> check_inplace_request(const Node& node, const std::string& text) {
  const OpInfo* info = find(node.op);
  std::string allowed;
  if (info != nullptr)
    for (const InplacePair& p : info->inplace)
      allowed += (allowed.empty() ? "" : ", ") + std::to_string(p.out) + ":" + std::to_string(p.in);
  const std::string where = "node '" + node.name + "' (" + node.op + "): tandem.inplace = \"" + text + "\": ";
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    size_t out = 0, in = 0;
    int used = 0;
    if (std::sscanf(item.c_str(), "%zu:%zu%n", &out, &in, &used) != 2 || used != int(item.size()))
      return make_error(where + "'" + item + "' is not out:in (two slot numbers)", TDM_INVALID_ARGUMENT);
    if (!slot_present(node.outputs, out) || !slot_present(node.inputs, in))
      return make_error(where + "the node has no output " + std::to_string(out) + " or no input " +
                            std::to_string(in) + " (" + std::to_string(node.outputs.size()) + " outputs, " +
                            std::to_string(node.inputs.size()) + " inputs)",
                        TDM_INVALID_ARGUMENT);
    bool ok = info == nullptr;  // a plugin's own op: its request is taken at its word
    if (info != nullptr)
      for (const InplacePair& p : info->inplace) ok = ok || (p.out == out && p.in == in);
    if (!ok)
      return make_error(where + "sdk/ops.md allows " + (allowed.empty() ? "no in-place pair" : allowed) +
                            " for " + node.op + ", not " + item + " (sdk/ABI.md rule 31)",
                        TDM_INVALID_ARGUMENT);
  }
  return {};
}

Result<void> check_attrs(std::string_view op, const std::vector<Attr>& attrs) {
  const catalog::Op* entry = catalog::find(op);
  if (entry == nullptr) return {};
  for (const catalog::Attribute& spec : entry->attrs) {
    const auto given =
        std::find_if(attrs.begin(), attrs.end(), [&](const Attr& a) { return a.name == spec.name; });
    if (given == attrs.end()) {
      if (spec.kind == catalog::Attribute::Default::required)
        return make_error("attribute '" + spec.name + "' is required", TDM_INVALID_ARGUMENT);
      continue;
    }
    if (const std::string why = catalog::attribute_error(spec, attr_to_c(*given)); !why.empty())
      return make_error(why, TDM_INVALID_ARGUMENT);
  }
  return {};
}

std::vector<std::pair<size_t, size_t>> reuse_pairs(const Node& node) {
  std::vector<std::pair<size_t, size_t>> pairs;
  if (const OpInfo* info = find(node.op))
    for (const InplacePair& p : info->inplace)
      if (p.reuse && slot_present(node.outputs, p.out) && slot_present(node.inputs, p.in))
        pairs.emplace_back(p.out, p.in);
  return pairs;
}

Result<std::vector<TensorType>> infer(std::string_view op, const ShapeQuery& q) {
  const OpInfo* info = find(op);
  const catalog::Op* entry = catalog::find(op);
  if (info == nullptr || (entry == nullptr && info->shape == nullptr))
    return std::vector<TensorType>(q.declared.begin(), q.declared.end());
  static const std::vector<Attr> kNone;
  ShapeQuery with_attrs = q;
  if (with_attrs.attrs == nullptr) with_attrs.attrs = &kNone;
  if (auto checked = check_attrs(op, *with_attrs.attrs); !checked)
    return make_error("op '" + std::string(op) + "': " + checked.error().message, TDM_INVALID_ARGUMENT);
  auto r = entry != nullptr ? catalog_shape(*entry, with_attrs) : info->shape(with_attrs);
  if (!r) return make_error("op '" + std::string(op) + "': " + r.error().message, r.error().status);
  return r;
}

Result<std::vector<TensorType>> infer(const Graph& g, std::string_view op, const std::vector<ValueId>& inputs,
                                      const std::vector<Attr>& attrs, std::span<const TensorType> declared) {
  ShapeQuery q;
  for (ValueId v : inputs) {
    const Value* value = v == kNoValue ? nullptr : g.value(v);
    q.inputs.push_back(value == nullptr ? std::nullopt : std::optional<TensorType>(value->type));
  }
  q.attrs = &attrs;
  q.declared = declared;
  return infer(op, q);
}

Result<void> check_outputs(const Graph& g, std::string_view op, const std::vector<ValueId>& inputs,
                           const std::vector<Attr>& attrs, std::span<const TensorType> declared) {
  auto want = infer(g, op, inputs, attrs, declared);
  if (!want) return want.error();
  // The kit's comparison (tandem/op_shapes.hpp), so host and backends word it alike.
  shapes::Outputs w;
  std::vector<TensorShape> d;
  for (const TensorType& t : *want) w.emplace_back(t.dtype, t.dims);
  for (const TensorType& t : declared) d.emplace_back(t.dtype, t.dims);
  if (const std::string why = shapes::outputs_error(w, d); !why.empty())
    return make_error("op '" + std::string(op) + "': " + why, TDM_INVALID_ARGUMENT);
  return {};
}

int64_t int_attr(const Node& n, std::string_view name) {
  return int_attr(n.attrs, name, catalog::literal_default(n.op, name).int_default);
}
double float_attr(const Node& n, std::string_view name) {
  return float_attr(n.attrs, name, catalog::literal_default(n.op, name).float_default);
}
std::string string_attr(const Node& n, std::string_view name) {
  return string_attr(n.attrs, name, catalog::literal_default(n.op, name).default_text);
}

const AttrValue* find_attr(const std::vector<Attr>& attrs, std::string_view name) {
  for (const Attr& a : attrs)
    if (a.name == name) return &a.value;
  return nullptr;
}

int64_t int_attr(const std::vector<Attr>& attrs, std::string_view name, int64_t fallback) {
  const AttrValue* v = find_attr(attrs, name);
  if (v == nullptr) return fallback;
  if (const auto* i = std::get_if<int64_t>(v)) return *i;
  if (const auto* d = std::get_if<double>(v)) return static_cast<int64_t>(*d);
  return fallback;
}

double float_attr(const std::vector<Attr>& attrs, std::string_view name, double fallback) {
  const AttrValue* v = find_attr(attrs, name);
  if (v == nullptr) return fallback;
  if (const auto* d = std::get_if<double>(v)) return *d;
  if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  return fallback;
}

std::string string_attr(const std::vector<Attr>& attrs, std::string_view name, const std::string& fallback) {
  const AttrValue* v = find_attr(attrs, name);
  const auto* s = v == nullptr ? nullptr : std::get_if<std::string>(v);
  return s == nullptr ? fallback : *s;
}

std::vector<int64_t> ints_attr(const std::vector<Attr>& attrs, std::string_view name,
                               std::vector<int64_t> fallback) {
  const AttrValue* v = find_attr(attrs, name);
  if (v == nullptr) return fallback;
  if (const auto* list = std::get_if<std::vector<int64_t>>(v)) return *list;
  if (const auto* i = std::get_if<int64_t>(v)) return {*i};
  return fallback;
}

}  // namespace tandem::host::ops
