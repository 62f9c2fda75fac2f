#include "build/autodiff.hpp"

#include <algorithm>
#include <set>

#include "build/shapes.hpp"

namespace tandem::host::build {
namespace {

bool is_float(tdm_dtype t) {
  return t == TDM_F32 || t == TDM_F64 || t == TDM_F16 || t == TDM_BF16;
}

const AttrValue* find_attr(const Node& n, const std::string& name) {
  for (const auto& a : n.attrs)
    if (a.name == name) return &a.value;
  return nullptr;
}

class Autodiff {
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
    return name_parameter_gradients();
  }

 private:
  void mark_requires_grad() {
    for (ValueId p : m_.parameters) requires_.insert(p);
    for (size_t i = 0; i < g_.node_count(); ++i) {
      const Node& n = *g_.node_at(i);
      const bool any =
          std::any_of(n.inputs.begin(), n.inputs.end(), [&](ValueId v) { return requires_.count(v) > 0; });
      if (!any) continue;
      for (ValueId out : n.outputs)
        if (is_float(g_.value(out)->type.dtype)) requires_.insert(out);
    }
  }

  bool needs(ValueId v) const { return v != kNoValue && requires_.count(v) > 0; }
  bool has_output_grad(const Node& n) const {
    return std::any_of(n.outputs.begin(), n.outputs.end(), [&](ValueId v) { return grad_.count(v) > 0; });
  }
  const TensorType& type(ValueId v) const { return g_.value(v)->type; }

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

  // A backward node of the forward node being differentiated.
  Result<std::vector<ValueId>> emit(const std::string& op, const std::string& suffix,
                                    std::vector<ValueId> inputs, std::vector<Attr> attrs,
                                    std::vector<TensorType> outputs) {
    std::string name = node_->name + "." + suffix;
    for (int i = 2; g_.node_by_name(name) != nullptr; ++i)
      name = node_->name + "." + suffix + std::to_string(i);
    return emit_raw(op, name, node_->layer, std::move(inputs), std::move(attrs), std::move(outputs));
  }

  Result<ValueId> emit1(const std::string& op, const std::string& suffix, std::vector<ValueId> inputs,
                        std::vector<Attr> attrs, TensorType out) {
    auto r = emit(op, suffix, std::move(inputs), std::move(attrs), {std::move(out)});
    if (!r) return r.error();
    return (*r)[0];
  }

  // Adds dx to x's gradient (summing when x is read by several nodes).
  Result<void> accumulate(ValueId x, ValueId dx) {
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

  // The gradient of a broadcast operand: sum over the broadcast axes.
  Result<void> accumulate_unbroadcast(ValueId x, ValueId dy) {
    if (!needs(x)) return {};
    const Dims& in = type(x).dims;
    const Dims& out = type(dy).dims;
    if (in == out) return accumulate(x, dy);
    const std::vector<int64_t> axes = broadcast_axes(in, out);
    Dims kept;
    for (size_t i = 0; i < out.size(); ++i)
      if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end()) kept.push_back(out[i]);
    auto sum = emit1("reduce_sum", "grad_reduce", {dy}, {{"axes", axes}, {"keepdims", int64_t{0}}},
                     TensorType{type(dy).dtype, kept});
    if (!sum) return sum.error();
    auto shaped = emit1("reshape", "grad_reshape", {*sum}, {}, type(x));
    if (!shaped) return shaped.error();
    return accumulate(x, *shaped);
  }

  Result<void> apply_rule(const Node& n);
  Result<void> name_parameter_gradients();

  ModelGraph& m_;
  Graph& g_;
  std::set<ValueId> requires_;
  std::map<ValueId, ValueId> grad_;
  const Node* node_ = nullptr;
  std::string current_device_;
};

Result<void> Autodiff::apply_rule(const Node& n) {
  node_ = &n;
  current_device_ = n.device;  // backward runs where forward ran (planner may move it)
  const auto& in = n.inputs;
  const ValueId y = n.outputs[0];
  auto dy_it = grad_.find(y);
  if (dy_it == grad_.end()) return {};  // only auxiliary outputs (stats, masks) were used
  const ValueId dy = dy_it->second;
  const std::string& op = n.op;
  auto copy_attrs = [&] { return n.attrs; };

  if (op == "linear" || op == "conv2d") {
    ValueId dz = dy;
    if (op == "linear") {
      const auto* act = find_attr(n, "activation");
      const std::string a = act ? std::get<std::string>(*act) : "none";
      if (a != "none") {
        auto r = emit1(a + "_grad", "act_grad", {dy, y}, {}, type(y));  // from the output: see sdk/ops.md
        if (!r) return r.error();
        dz = *r;
      }
    }
    const bool has_bias = in.size() > 2 && in[2] != kNoValue;
    std::vector<Attr> attrs = op == "conv2d" ? copy_attrs() : std::vector<Attr>{};
    if (needs(in[0])) {
      auto dx = emit1(op + "_grad_input", "grad_input", {dz, in[1]}, attrs, type(in[0]));
      if (!dx) return dx.error();
      if (auto r = accumulate(in[0], *dx); !r) return r;
    }
    attrs.push_back({"has_bias", int64_t{has_bias}});
    std::vector<TensorType> outs = {type(in[1])};
    if (has_bias) outs.push_back(type(in[2]));
    auto dw = emit(op + "_grad_weight", "grad_weight", {dz, in[0]}, attrs, outs);
    if (!dw) return dw.error();
    if (auto r = accumulate(in[1], (*dw)[0]); !r) return r;
    if (has_bias) return accumulate(in[2], (*dw)[1]);
    return {};
  }
  if (op == "relu" || op == "gelu") {
    auto dx = emit1(op + "_grad", "grad", {dy, in[0]}, copy_attrs(), type(in[0]));
    if (!dx) return dx.error();
    return accumulate(in[0], *dx);
  }
  if (op == "fake_quant") {  // the straight-through estimator (sdk/ops.md), from x
    auto dx = emit1("fake_quant_grad", "grad", {dy, in[0]}, copy_attrs(), type(in[0]));
    if (!dx) return dx.error();
    return accumulate(in[0], *dx);
  }
  if (op == "tanh" || op == "sigmoid" || op == "softmax" || op == "log_softmax") {
    auto dx = emit1(op + "_grad", "grad", {dy, y}, copy_attrs(), type(in[0]));
    if (!dx) return dx.error();
    return accumulate(in[0], *dx);
  }
  if (op == "max_pool2d" || op == "avg_pool2d") {
    std::vector<ValueId> inputs = {dy};
    if (op == "max_pool2d") inputs.push_back(in[0]);
    auto dx = emit1(op + "_grad", "grad", inputs, copy_attrs(), type(in[0]));
    if (!dx) return dx.error();
    return accumulate(in[0], *dx);
  }
  if (op == "softmax_cross_entropy") {
    auto dx = emit1("softmax_cross_entropy_grad", "grad", {dy, in[0], in[1]}, copy_attrs(), type(in[0]));
    if (!dx) return dx.error();
    return accumulate(in[0], *dx);
  }
  if (op == "layer_norm" || op == "batch_norm_train") {
    const std::string grad_op = op == "layer_norm" ? "layer_norm_grad" : "batch_norm_grad";
    auto r = emit(grad_op, "grad", {dy, in[0], in[1], n.outputs[1], n.outputs[2]}, {},
                  {type(in[0]), type(in[1]), type(in[2])});
    if (!r) return r.error();
    for (int i = 0; i < 3; ++i)
      if (auto a = accumulate(in[static_cast<size_t>(i)], (*r)[static_cast<size_t>(i)]); !a) return a;
    return {};
  }
  if (op == "embedding") {
    auto dt = emit1("embedding_grad", "grad", {dy, in[1]}, copy_attrs(), type(in[0]));
    if (!dt) return dt.error();
    return accumulate(in[0], *dt);
  }
  if (op == "dropout") {
    auto dx = emit1("dropout_grad", "grad", {dy, n.outputs[1]}, {{"p", std::get<double>(*find_attr(n, "p"))}},
                    type(in[0]));
    if (!dx) return dx.error();
    return accumulate(in[0], *dx);
  }
  if (op == "add") {
    if (auto r = accumulate_unbroadcast(in[0], dy); !r) return r;
    return accumulate_unbroadcast(in[1], dy);
  }
  if (op == "sub") {
    if (auto r = accumulate_unbroadcast(in[0], dy); !r) return r;
    if (!needs(in[1])) return {};
    auto neg = emit1("scale", "grad_neg", {dy}, {{"alpha", -1.0}}, type(dy));
    if (!neg) return neg.error();
    return accumulate_unbroadcast(in[1], *neg);
  }
  if (op == "mul") {
    for (int i = 0; i < 2; ++i) {
      const ValueId self = in[static_cast<size_t>(i)], other = in[static_cast<size_t>(1 - i)];
      if (!needs(self)) continue;
      auto d = emit1("mul", "grad_mul", {dy, other}, {}, type(dy));
      if (!d) return d.error();
      if (auto r = accumulate_unbroadcast(self, *d); !r) return r;
    }
    return {};
  }
  if (op == "reshape") {
    auto dx = emit1("reshape", "grad", {dy}, {}, type(in[0]));
    if (!dx) return dx.error();
    return accumulate(in[0], *dx);
  }
  if (op == "transpose") {
    const auto* perm_attr = find_attr(n, "perm");
    const size_t rank = type(in[0]).dims.size();
    std::vector<int64_t> perm(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);  // the default: reversed
    if (perm_attr != nullptr) perm = std::get<std::vector<int64_t>>(*perm_attr);
    std::vector<int64_t> inverse(rank);
    for (size_t k = 0; k < rank; ++k) inverse[static_cast<size_t>(perm[k])] = static_cast<int64_t>(k);
    auto dx = emit1("transpose", "grad", {dy}, {{"perm", inverse}}, type(in[0]));
    if (!dx) return dx.error();
    return accumulate(in[0], *dx);
  }
  // Tensor parallelism (exec/collectives.hpp): each op's gradient is its dual.
  if (op == "comm.all_reduce") return accumulate(in[0], dy);
  if (op == "comm.copy_to_parallel" || op == "comm.all_gather" || op == "comm.chunk") {
    const std::string dual = op == "comm.copy_to_parallel" ? "comm.all_reduce"
                             : op == "comm.all_gather"     ? "comm.chunk"
                                                           : "comm.all_gather";
    auto dx = emit1(dual, "grad", {dy}, {}, type(in[0]));
    if (!dx) return dx.error();
    return accumulate(in[0], *dx);
  }
  if (op == "scale") {
    const auto* alpha = find_attr(n, "alpha");
    auto dx = emit1("scale", "grad", {dy}, {{"alpha", alpha ? std::get<double>(*alpha) : 1.0}}, type(in[0]));
    if (!dx) return dx.error();
    return accumulate(in[0], *dx);
  }
  return make_error("layer '" + n.layer + "': no gradient rule for op '" + op + "' (node '" + n.name +
                        "'); it can be used for inference only",
                    TDM_UNSUPPORTED);
}

Result<void> Autodiff::name_parameter_gradients() {
  std::set<ValueId> claimed;
  for (ValueId p : m_.parameters) {
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

}  // namespace

Result<void> append_backward(ModelGraph& model) {
  return Autodiff(model).run();
}

}  // namespace tandem::host::build
