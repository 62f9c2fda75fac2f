#include "lowering/optimizer.hpp"

#include "ops/op_table.hpp"

namespace tandem::host::lowering {
namespace {

const TensorType kScalarF32{TDM_F32, {}};

class OptimizerBuilder {
 public:
  OptimizerBuilder(ModelGraph& m, const model::TrainSpec& t) : m_(m), g_(m.graph), t_(t) {}

  Result<void> run() {
    if (m_.zero.stage == 2 && m_.zero.active())
      for (ValueId p : m_.parameters)
        if (m_.trained(p))
          if (auto r = reduce_scatter(p); !r) return r;
    for (const auto& [p, whole] : m_.zero.parameters)
      if (m_.trained(p)) m_.zero.gradients[m_.gradients.at(p)] = whole;
    auto lr = g_.add_state("optim.lr", kScalarF32, t_.lr);
    if (!lr) return lr.error();
    m_.lr = *lr;
    if (t_.optimizer == "adamw") {
      auto step = g_.add_state("optim.step", TensorType{TDM_S32, {}}, 1.0);
      if (!step) return step.error();
      m_.step = *step;
    }
    // The optimizer phase starts with the global norm, so that the host can
    // first combine gradients across ranks (data parallelism), then read the
    // norm, then run the rest.
    m_.optimizer_begin = g_.node_count();
    if (t_.clip_grad_norm > 0)
      if (auto r = global_norm(); !r) return r;
    for (ValueId p : m_.parameters)
      if (m_.trained(p))
        if (auto r = update(p); !r) return r;
    return {};
  }

 private:
  std::string name_of(ValueId v) const { return g_.value(v)->name; }
  std::string layer_of(ValueId p) const {
    const std::string n = name_of(p);
    return n.substr(0, n.rfind('.'));
  }

  Result<std::vector<ValueId>> emit(const std::string& op, const std::string& name, ValueId param,
                                    std::vector<ValueId> inputs, std::vector<Attr> attrs,
                                    std::vector<TensorType> outputs, tdm_phase phase = TDM_PHASE_OPTIMIZER) {
    NodeSpec spec{op, name, layer_of(param), phase, std::move(attrs), std::move(inputs), std::move(outputs),
                  {}};
    auto id = g_.insert_node(std::move(spec));
    if (!id) return id.error();
    return g_.node(*id)->outputs;
  }

  // Sum over all gradients of sum(g*g), at the end of the backward phase.
  // With tensor parallelism a rank holds a slice of each split parameter
  // and the whole of every other (the same on every rank): the slices' sum
  // is all-reduced over the ranks before the others' is added, so every
  // rank clips by the norm of the whole model, as one process would.
  Result<void> global_norm() {
    ValueId split = kNoValue, whole = kNoValue;
    for (ValueId p : m_.parameters) {
      if (!m_.trained(p)) continue;
      const ValueId g = averaged_gradient(p);
      const std::string base = name_of(p);
      auto sq = emit("mul", base + ".grad_sq", p, {g, g}, {}, {g_.value(g)->type}, TDM_PHASE_OPTIMIZER);
      if (!sq) return sq.error();
      auto sum = emit("reduce_sum", base + ".grad_sq_sum", p, {(*sq)[0]}, {{"axes", std::vector<int64_t>{}}},
                      {kScalarF32}, TDM_PHASE_OPTIMIZER);
      if (!sum) return sum.error();
      const bool sliced = m_.tensor_parallel.size > 1 && m_.shards.count(p) != 0;
      ValueId& total = sliced ? split : whole;
      auto acc = add_to(total, (*sum)[0], base + ".grad_norm_acc", p);
      if (!acc) return acc.error();
    }
    if (split != kNoValue) {
      const ValueId first = m_.parameters.front();
      auto reduced = emit(ops::kAllReduce, "optim.grad_norm_sq_split.all_reduce", first, {split}, {},
                          {kScalarF32}, TDM_PHASE_OPTIMIZER);
      if (!reduced) return reduced.error();
      split = (*reduced)[0];
      if (auto acc = add_to(whole, split, "optim.grad_norm_sq_total", first); !acc) return acc.error();
    }
    if (m_.zero.stage >= 2 && m_.zero.active()) {  // each rank summed its shards
      auto total = emit(ops::kZeroAllReduce, "optim.grad_norm_sq.zero_all_reduce", m_.parameters.front(),
                        {whole}, {}, {kScalarF32}, TDM_PHASE_OPTIMIZER);
      if (!total) return total.error();
      whole = (*total)[0];
    }
    if (auto r = g_.rename_value(whole, "optim.grad_norm_sq"); !r) return r;
    m_.grad_norm_sq = whole;
    auto coef = g_.add_state("optim.clip_coef", kScalarF32, 1.0);
    if (!coef) return coef.error();
    m_.clip_coef = *coef;
    return {};
  }

  // total += v (total = v when it is still empty).
  Result<void> add_to(ValueId& total, ValueId v, const std::string& name, ValueId param) {
    if (total == kNoValue) {
      total = v;
      return {};
    }
    auto acc = emit("add", name, param, {total, v}, {}, {kScalarF32}, TDM_PHASE_OPTIMIZER);
    if (!acc) return acc.error();
    total = (*acc)[0];
    return {};
  }

  // The gradient the optimizer phase reads: with ZeRO stage 2, this rank's
  // shard of the average; otherwise autodiff's (with stage 3 already that
  // shard; else the whole gradient, which the host averages).
  ValueId averaged_gradient(ValueId p) const {
    auto shard = gradient_shards_.find(p);
    return shard != gradient_shards_.end() ? shard->second : m_.gradients.at(p);
  }

  TensorType shard_type(ValueId p) const {
    const TensorType& whole = g_.value(p)->type;
    return {whole.dtype, {zero_shard_elements(numel(whole.dims), m_.zero.world)}};
  }

  // Stage 2: the gradient averaged into this rank's shard right after the
  // last backward node that writes or reads it, so the arena can reuse the
  // whole gradient's bytes for the rest of backward.
  Result<void> reduce_scatter(ValueId p) {
    const ValueId g = m_.gradients.at(p);
    size_t last = *g_.position(g_.value(g)->producer);
    for (NodeId reader : g_.consumers(g)) last = std::max(last, *g_.position(reader));
    const NodeId anchor = last + 1 < g_.node_count() ? g_.node_at(last + 1)->id : kNoNode;
    const std::string name = g_.value(g)->name + ".shard";
    NodeSpec spec{ops::kZeroReduceScatter,
                  name_of(p) + ".grad_zero_shard",
                  layer_of(p),
                  TDM_PHASE_BACKWARD,
                  {},
                  {g},
                  {shard_type(p)},
                  {name}};
    auto id = g_.insert_node(std::move(spec), anchor);
    if (!id) return id.error();
    const ValueId shard = g_.node(*id)->outputs[0];
    gradient_shards_[p] = shard;
    m_.zero.gradients[shard] = g_.value(p)->type.dims;
    // The shard is the gradient the step keeps (and a pass such as
    // grad_accum accumulates); the whole one is an activation of backward.
    if (auto r = g_.set_value_kind(shard, TDM_VALUE_GRADIENT); !r) return r;
    return g_.set_value_kind(g, TDM_VALUE_ACTIVATION);
  }

  Result<void> update(ValueId p) {
    const std::string base = name_of(p);
    const bool zero = m_.zero.active() && !m_.zero.shards_parameters();  // stage 3: p is a shard
    const TensorType type = zero ? shard_type(p) : g_.value(p)->type;
    ValueId grad = averaged_gradient(p), target = p;
    if (zero) {
      if (m_.zero.stage == 1) {
        auto g = emit(ops::kZeroShard, base + ".grad_zero_shard", p, {grad}, {}, {type});
        if (!g) return g.error();
        grad = (*g)[0];
      }
      auto shard = emit(ops::kZeroShard, base + ".zero_shard", p, {p}, {}, {type});
      if (!shard) return shard.error();
      target = (*shard)[0];
    }
    if (auto r = update(p, target, grad, type); !r) return r;
    if (!zero) return {};
    auto gathered = emit(ops::kZeroGather, base + ".zero_gather", p, {updated_, p}, {}, {g_.value(p)->type});
    if (!gathered) return gathered.error();
    return {};
  }

  // One update of `target` (the parameter `p`, or this rank's shard of it)
  // from `grad`; its state has `type`.
  Result<void> update(ValueId p, ValueId target, ValueId grad, const TensorType& type) {
    const std::string base = name_of(p);
    if (m_.clip_coef != kNoValue) {
      auto clipped = emit("mul", base + ".clip", p, {grad, m_.clip_coef}, {}, {type});
      if (!clipped) return clipped.error();
      grad = (*clipped)[0];
    }
    if (t_.optimizer == "adamw") {
      auto m = g_.add_state("optim." + base + ".m", type, 0.0);
      auto v = g_.add_state("optim." + base + ".v", type, 0.0);
      if (!m || !v) return make_error("cannot add AdamW state for '" + base + "'", TDM_INTERNAL);
      record_shard(p, {*m, *v});
      auto r = emit("adamw_update", base + ".update", p, {target, grad, *m, *v, m_.lr, m_.step},
                    {{"beta1", t_.beta1},
                     {"beta2", t_.beta2},
                     {"epsilon", t_.epsilon},
                     {"weight_decay", t_.weight_decay}},
                    {type, type, type});
      if (!r) return r.error();
      updated_ = (*r)[0];
      return {};
    }
    std::vector<ValueId> inputs = {target, grad, m_.lr};
    std::vector<TensorType> outputs = {type};
    if (t_.momentum != 0) {
      auto buf = g_.add_state("optim." + base + ".momentum", type, 0.0);
      if (!buf) return buf.error();
      record_shard(p, {*buf});
      inputs.push_back(*buf);
      outputs.push_back(type);
    }
    auto r = emit("sgd_update", base + ".update", p, inputs,
                  {{"momentum", t_.momentum},
                   {"dampening", t_.dampening},
                   {"nesterov", int64_t{t_.nesterov}},
                   {"weight_decay", t_.weight_decay}},
                  outputs);
    if (!r) return r.error();
    updated_ = (*r)[0];
    return {};
  }

  void record_shard(ValueId p, std::initializer_list<ValueId> states) {
    if (!m_.zero.active()) return;
    auto whole = m_.zero.parameters.find(p);
    for (ValueId s : states)
      m_.zero.states[s] = whole != m_.zero.parameters.end() ? whole->second : g_.value(p)->type.dims;
  }

  ModelGraph& m_;
  Graph& g_;
  const model::TrainSpec& t_;
  std::map<ValueId, ValueId> gradient_shards_;  // stage 2: parameter -> its averaged gradient shard
  ValueId updated_ = kNoValue;                  // the last update's new parameter (or shard)
};

}  // namespace

Result<void> append_optimizer(ModelGraph& model, const model::TrainSpec& train) {
  return OptimizerBuilder(model, train).run();
}

}  // namespace tandem::host::lowering
