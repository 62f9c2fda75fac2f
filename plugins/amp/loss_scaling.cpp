// Where the scale goes in and comes out, and why there
// ----------------------------------------------------
// In: the loss gradient seed ("loss.grad_seed", a fill of 1, or 1/k under
// grad_accum) is multiplied by the state amp.loss_scale, so the whole
// backward flow (including its compute-dtype ops) carries scaled values.
// Out: a node that produces a parameter gradient (linear_grad_weight,
// conv2d_grad_weight, layer_norm_grad, a grad_sum add, ...) reads its
// backward-flow inputs through mul(., amp.inv_scale). Unscaling the inputs
// rather than the output keeps the gradient *value* the one autodiff named,
// which the optimizer, clipping, the data-parallel all-reduce and grad_accum
// find by identity. Those nodes run in f32 (autocast.cpp), so the
// unscaling itself cannot overflow or underflow in low precision. A
// non-gradient output of such a node (layer_norm_grad's dx) is multiplied
// back by amp.loss_scale so the flow upstream stays scaled.
// Check: reduce_sum of each gradient, added in place into its state scalar
// amp.overflow.<gradient>. The hook reads and zeroes it once per optimizer
// step, so with grad_accum an overflow in any micro-batch is seen. The sum
// of a finite gradient could itself overflow only past 3e38, far beyond any
// gradient an optimizer step could survive.
#include "loss_scaling.hpp"

namespace amp {
namespace {

using tandem::Error;

ValueView scalar(tdm_dtype dtype) {
  ValueView v;
  v.dtype = dtype;
  return v;
}

tdm_node_id insert_mul(GraphEdit& g, const std::string& name, const std::string& layer, tdm_phase phase,
                       tdm_value_id x, tdm_value_id factor, tdm_node_id anchor) {
  GraphEdit::Spec mul;
  mul.op = "mul";
  mul.name = g.fresh_name(name);
  mul.layer = layer;
  mul.phase = phase;
  mul.inputs = {x, factor};
  mul.outputs = {g.value(x)};
  mul.anchor = anchor;
  return g.insert(mul);
}

void scale_seed(GraphEdit& g, tdm_value_id scale) {
  for (const NodeView& n : g.nodes()) {
    if (n.name != "loss.grad_seed") continue;
    const tdm_value_id seed = n.outputs.at(0);
    if (g.value(seed).dtype != TDM_F32)
      throw Error(TDM_UNSUPPORTED, "amp: the loss gradient seed is not f32; loss scaling needs an f32 loss");
    const tdm_node_id mul =
        insert_mul(g, "amp.scale_seed", n.layer, TDM_PHASE_BACKWARD, seed, scale, g.next_after(n.id));
    g.replace_uses(seed, g.output(mul, 0), mul);
    return;
  }
  throw Error(TDM_INVALID_ARGUMENT, "amp: no 'loss.grad_seed' node: is this a training graph?");
}

bool is_float(tdm_dtype t) {
  return t == TDM_F32 || t == TDM_F16 || t == TDM_BF16 || t == TDM_F64;
}

}  // namespace

std::vector<OverflowCheck> insert_loss_scaling(GraphEdit& g, double initial_scale) {
  const tdm_value_id scale = g.add_state(kScaleState, TDM_F32, {}, initial_scale);
  const tdm_value_id inverse = g.add_state(kInverseState, TDM_F32, {}, 1.0 / initial_scale);
  scale_seed(g, scale);

  std::vector<OverflowCheck> checks;
  for (const NodeView& snapshot : g.nodes()) {
    if (snapshot.phase != TDM_PHASE_BACKWARD) continue;
    const NodeView p = g.node(snapshot.id);
    std::vector<tdm_value_id> gradients, others;
    for (tdm_value_id v : p.outputs) {
      const ValueView out = g.value(v);
      if (out.kind == TDM_VALUE_GRADIENT)
        gradients.push_back(v);
      else if (is_float(out.dtype))
        others.push_back(v);
    }
    if (gradients.empty()) continue;
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const tdm_value_id v = p.inputs[i];
      if (v == TDM_NO_VALUE) continue;
      const ValueView in = g.value(v);
      // Another parameter's gradient (autodiff copies it when two parameters
      // share one) is unscaled already.
      if (in.producer < 0 || in.kind == TDM_VALUE_GRADIENT || !is_float(in.dtype) ||
          g.node(in.producer).phase != TDM_PHASE_BACKWARD)
        continue;
      if (in.dtype != TDM_F32)
        throw Error(TDM_INTERNAL, "amp: node '" + p.name + "' makes a parameter gradient from a " +
                                      "non-f32 input; loss scaling unscales in f32 only");
      const tdm_node_id mul = insert_mul(g, "amp.unscale." + p.name, p.layer, p.phase, v, inverse, p.id);
      g.set_input(p.id, i, g.output(mul, 0));
    }
    for (tdm_value_id v : others) {
      const tdm_node_id mul =
          insert_mul(g, "amp.rescale." + p.name, p.layer, p.phase, v, scale, g.next_after(p.id));
      g.replace_uses(v, g.output(mul, 0), mul);
    }
    for (tdm_value_id v : gradients) {
      const ValueView grad = g.value(v);
      const tdm_value_id sum_state = g.add_state("amp.overflow." + grad.name, TDM_F32, {}, 0.0);
      GraphEdit::Spec reduce;
      reduce.op = "reduce_sum";
      reduce.name = g.fresh_name("amp.check_sum." + grad.name);
      reduce.layer = p.layer;
      reduce.phase = p.phase;
      OwnedAttr axes;
      axes.name = "axes";
      axes.type = TDM_ATTR_INTS;
      reduce.attrs = {axes};
      reduce.inputs = {v};
      reduce.outputs = {scalar(TDM_F32)};
      reduce.anchor = g.next_after(p.id);
      const tdm_node_id reduce_id = g.insert(reduce);
      GraphEdit::Spec add;
      add.op = "add";
      add.name = g.fresh_name("amp.check." + grad.name);
      add.layer = p.layer;
      add.phase = p.phase;
      add.inputs = {sum_state, g.output(reduce_id, 0)};
      add.outputs = {scalar(TDM_F32)};
      add.anchor = g.next_after(reduce_id);
      const tdm_node_id add_id = g.insert(add);
      g.annotate(add_id, "tandem.inplace", "0:0");  // the sum lands in the state itself
      checks.push_back({"amp.overflow." + grad.name, grad.name, p.layer});
    }
  }
  return checks;
}

}  // namespace amp
