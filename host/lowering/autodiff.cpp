#include "lowering/autodiff.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "ops/grad_context.hpp"
#include "ops/op_table.hpp"
#include "ops/shapes.hpp"

namespace tandem::host::lowering {
namespace {

bool is_float(tdm_dtype t) {
  return t == TDM_F32 || t == TDM_F64 || t == TDM_F16 || t == TDM_BF16;
}

// Reverse-mode differentiation of the forward graph: each forward node's
// gradient rule comes from the op table (host/ops/); this class is the
// GradContext those rules emit backward nodes through.
class Autodiff final : public ops::GradContext {
 public:
  explicit Autodiff(ModelGraph& m) : m_(m), g_(m.graph) {}

  Result<void> run() {
    mark_requires_grad();
    m_.backward_begin = g_.node_count();
    auto seed = emit_raw("fill", "loss.grad_seed", "loss", {}, {{"value", 1.0}}, {g_.value(m_.loss)->type});
    if (!seed) return seed.error();
    grad_[m_.loss] = (*seed)[0];
    std::vector<NodeId> forward;
    for (size_t i = 0; i < m_.backward_begin; ++i) forward.push_back(g_.node_at(i)->id);
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
      const Node node = *g_.node(*it);  // copy: emitting nodes may move the map's storage
      if (!has_output_grad(node)) continue;
      if (auto r = apply_rule(node); !r) return r;
    }
    if (auto r = name_parameter_gradients(); !r) return r;
    return remove_unread_backward();
  }

  // GradContext
  const Node& node() const override { return *node_; }
  ValueId dy() const override { return dy_; }
  bool needs(ValueId v) const override { return v != kNoValue && requires_.count(v) > 0; }
  const TensorType& type(ValueId v) const override { return g_.value(v)->type; }

  // A backward node of the forward node being differentiated.
  Result<std::vector<ValueId>> emit(const std::string& op, const std::string& suffix,
                                    std::vector<ValueId> inputs, std::vector<Attr> attrs,
                                    std::vector<TensorType> outputs) override {
    std::string name = node_->name + "." + suffix;
    for (int i = 2; g_.node_by_name(name) != nullptr; ++i)
      name = node_->name + "." + suffix + std::to_string(i);
    return emit_raw(op, name, node_->layer, std::move(inputs), std::move(attrs), std::move(outputs));
  }

  // Adds dx to x's gradient (summing when x is read by several nodes).
  Result<void> accumulate(ValueId x, ValueId dx) override {
    if (!needs(x)) return {};
    auto it = grad_.find(x);
    if (it == grad_.end()) {
      grad_[x] = dx;
      return {};
    }
    auto sum = emit1("add", "grad_sum", {it->second, dx}, {}, type(x));
    if (!sum) return sum.error();
    it->second = *sum;
    return {};
  }

  ValueId partial(ValueId x) const override {
    if (!m_.gradient_addends) return kNoValue;
    auto it = grad_.find(x);
    return it == grad_.end() ? kNoValue : it->second;
  }

  Result<void> replace(ValueId x, ValueId dx) override {
    if (!needs(x)) return {};
    grad_[x] = dx;
    return {};
  }

  // The gradient of a broadcast operand: sum over the broadcast axes.
  Result<void> accumulate_unbroadcast(ValueId x, ValueId dy) override {
    if (!needs(x)) return {};
    const ops::Dims& in = type(x).dims;
    const ops::Dims& out = type(dy).dims;
    if (in == out) return accumulate(x, dy);
    const std::vector<int64_t> axes = ops::broadcast_axes(in, out);
    ops::Dims kept;
    for (size_t i = 0; i < out.size(); ++i)
      if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end()) kept.push_back(out[i]);
    auto sum = emit1("reduce_sum", "grad_reduce", {dy}, {{"axes", axes}, {"keepdims", int64_t{0}}},
                     TensorType{type(dy).dtype, kept});
    if (!sum) return sum.error();
    auto shaped = emit1("reshape", "grad_reshape", {*sum}, {}, type(x));
    if (!shaped) return shaped.error();
    return accumulate(x, *shaped);
  }

 private:
  void mark_requires_grad() {
    for (ValueId p : m_.parameters)
      if (m_.trained(p)) requires_.insert(p);
    for (size_t i = 0; i < g_.node_count(); ++i) {
      const Node& n = *g_.node_at(i);
      const bool any =
          std::any_of(n.inputs.begin(), n.inputs.end(), [&](ValueId v) { return requires_.count(v) > 0; });
      if (!any) continue;
      for (ValueId out : n.outputs)
        if (is_float(g_.value(out)->type.dtype)) requires_.insert(out);
    }
  }

  bool has_output_grad(const Node& n) const {
    return std::any_of(n.outputs.begin(), n.outputs.end(), [&](ValueId v) { return grad_.count(v) > 0; });
  }

  Result<std::vector<ValueId>> emit_raw(const std::string& op, const std::string& name,
                                        const std::string& layer, std::vector<ValueId> inputs,
                                        std::vector<Attr> attrs, std::vector<TensorType> outputs) {
    NodeSpec spec;
    spec.op = op;
    spec.name = name;
    spec.layer = layer;
    spec.phase = TDM_PHASE_BACKWARD;
    spec.attrs = std::move(attrs);
    spec.inputs = std::move(inputs);
    spec.outputs = std::move(outputs);
    auto id = g_.insert_node(std::move(spec));
    if (!id) return id.error();
    const Node* n = g_.node(*id);
    if (!current_device_.empty())
      if (auto r = g_.set_device(*id, current_device_); !r) return r.error();
    return n->outputs;
  }

  Result<void> apply_rule(const Node& n);
  Result<void> name_parameter_gradients();
  Result<void> remove_unread_backward();

  ModelGraph& m_;
  Graph& g_;
  std::set<ValueId> requires_;
  std::map<ValueId, ValueId> grad_;
  const Node* node_ = nullptr;
  ValueId dy_ = kNoValue;
  std::string current_device_;
};

Result<void> Autodiff::apply_rule(const Node& n) {
  auto dy_it = grad_.find(n.outputs[0]);
  if (dy_it == grad_.end()) return {};  // only auxiliary outputs (stats, masks) were used
  node_ = &n;
  dy_ = dy_it->second;
  current_device_ = n.device;  // backward runs where forward ran (placement may move it)
  const ops::OpInfo* info = ops::find(n.op);
  if (info == nullptr || info->grad == nullptr)
    return make_error(
        "layer '" + n.layer + "': no gradient rule for op '" + n.op + "' (node '" + n.name + "'): " +
            (info == nullptr ? std::string("the host does not know this op") : std::string(info->no_grad)) +
            "; it can be used for inference only",
        TDM_UNSUPPORTED);
  return info->grad(*this);
}

Result<void> Autodiff::name_parameter_gradients() {
  if (std::none_of(m_.parameters.begin(), m_.parameters.end(), [&](ValueId p) { return m_.trained(p); }))
    return make_error("every layer with parameters has trainable = false: there is nothing to train",
                      TDM_INVALID_ARGUMENT);
  std::set<ValueId> claimed;
  for (ValueId p : m_.parameters) {
    if (!m_.trained(p)) continue;
    auto it = grad_.find(p);
    const std::string pname = g_.value(p)->name;
    if (it == grad_.end())
      return make_error(
          "parameter '" + pname + "' does not influence the loss; remove its layer or connect it",
          TDM_INVALID_ARGUMENT);
    ValueId grad = it->second;
    // A gradient must be a value of its own: not an input, not another
    // parameter's gradient (add passes dy through to both operands).
    if (g_.value(grad)->producer == kNoNode || claimed.count(grad) > 0) {
      const std::string layer = pname.substr(0, pname.rfind('.'));
      auto c = emit_raw("copy", pname + ".grad_copy", layer, {grad}, {}, {type(p)});
      if (!c) return c.error();
      grad = (*c)[0];
    }
    claimed.insert(grad);
    if (auto r = g_.set_value_kind(grad, TDM_VALUE_GRADIENT); !r) return r;
    if (auto r = g_.rename_value(grad, pname + ".grad"); !r) return r;
    m_.gradients[p] = grad;
  }
  return {};
}

// Gradient rules emit a node's whole gradient op (a linear's weight gradient
// with its input's); where nothing reads an output — the weight of a frozen
// layer, an embedding's table — the product is removed, not computed.
Result<void> Autodiff::remove_unread_backward() {
  std::map<ValueId, size_t> readers;  // counted once, kept as nodes go: one pass, not one per value
  for (size_t i = 0; i < g_.node_count(); ++i)
    for (ValueId v : g_.node_at(i)->inputs) ++readers[v];
  for (size_t i = g_.node_count(); i-- > m_.backward_begin;) {
    const Node n = *g_.node_at(i);
    const bool read = std::any_of(n.outputs.begin(), n.outputs.end(), [&](ValueId v) {
      return g_.value(v)->kind == TDM_VALUE_GRADIENT || readers[v] > 0;
    });
    if (read || n.outputs.empty()) continue;
    for (ValueId v : n.inputs) --readers[v];
    if (auto r = g_.remove_node(n.id); !r) return r;
  }
  return {};
}

}  // namespace

Result<void> append_backward(ModelGraph& model) {
  return Autodiff(model).run();
}

}  // namespace tandem::host::lowering
