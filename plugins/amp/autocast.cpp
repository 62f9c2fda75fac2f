// Why the pass runs after autodiff and converts backward ops itself
// ---------------------------------------------------------------------
// A feature has one pass stage (tdm_feature_api.pass_stage), and loss
// scaling needs the backward graph (the loss gradient seed, the parameter
// gradients). So amp runs once, after autodiff, and does what PyTorch's
// autocast does at dispatch: each op on the list below runs on compute-dtype
// tensors, forward and backward alike, and casts appear only at the borders
// with f32 ops. The result is the graph a cast-before-autodiff pass would
// give (the gradient of a cast is a cast back), without a second pass stage
// and without touching the host.
//
// What runs in the compute dtype is what the catalog classes so
// (tandem/op_catalog_entries.hpp; the host reports it through node_op_info,
// TDM_OP_AMP_LOW, and TDM_OP_AMP_BF16 for what is safe in bf16 only):
// today the products and their grad_input ops, the activations and their
// gradients (softplus aside, f32 as in PyTorch's autocast), pooling (bf16
// only), dropout, rope, attention, and reshape and transpose (free in any
// dtype, they avoid cast pairs around a flatten).
// Slots the catalog fixes at f32 (attention's log-sum-exp) stay f32.
// Kept in f32, by rule:
//   - softmax, log_softmax, softmax_cross_entropy (the loss), layer_norm,
//     batch_norm_*, reduce_*, add/sub/mul/scale, embedding_grad and the
//     optimizer: classed f32 (exp/log/variance and long sums lose too
//     much in 8 mantissa bits; add/mul carry residuals and the loss scale).
//   - any node producing a parameter gradient (linear_grad_weight,
//     conv2d_grad_weight, ...): the gradient value is what the optimizer,
//     clipping, data-parallel all-reduce and grad_accum read by identity,
//     so it must stay the f32 value autodiff made; it also keeps dW summed
//     over the batch in f32 rather than rounded to bf16.
//   - the node producing the loss's input (the logits), also behind the
//     reshapes of a language model's per-token loss: the trainer reports
//     those values, and the classifier head is the usual f32 exception.
//   Where the host offers wide products (ABI 1.11) the two kinds of
//   product among these, linear_grad_weight and a linear head, keep their
//   f32 outputs (and the head's f32 bias) but read compute-dtype operands:
//   the node itself stays, only its inputs change, so the gradient keeps
//   its identity, and the sum is the f32 one of bf16 products (exact in
//   f32) instead of an f32 product on the FMA units after up-casts. Under
//   loss scaling linear_grad_weight keeps f32 operands: the scaling pass
//   unscales a gradient's inputs, which must be f32 for that (a 16-bit
//   unscaled dy would underflow, the reason for scaling).
// bf16 kernels: sdk/ops.md lists bf16 for every op above on reference;
// onednn implements bf16 for all of them (plugins/onednn/README.md) and
// declines f16, so dtype = "f16" runs on reference and cuda only.
#include "autocast.hpp"

#include "options.hpp"

#include <map>
#include <set>

namespace amp {
namespace {

bool is_float(tdm_dtype t) {
  return t == TDM_F32 || t == TDM_F16 || t == TDM_BF16 || t == TDM_F64;
}

bool has_bit(uint64_t mask, size_t i) {
  return i < 64 && (mask >> i & 1u) != 0;
}

// The products that may read compute-dtype operands into f32 outputs
// (ops.md "Wide outputs"): their first two inputs are the operands (a
// linear's bias stays f32, like its output).
size_t wide_operands(const tandem::OpKind& kind) {
  return kind.is(TDM_OP_WIDE_PRODUCT) ? 2 : 0;
}

class Autocast {
 public:
  Autocast(GraphEdit& g, tdm_dtype dtype, bool wide_products, bool wide_gradients)
      : g_(g), dtype_(dtype), wide_(wide_products), wide_gradients_(wide_gradients) {}

  AutocastReport run() {
    const std::vector<NodeView> nodes = g_.nodes();
    find_protected(nodes);
    AutocastReport report;
    for (const NodeView& snapshot : nodes) {
      const NodeView n = g_.node(snapshot.id);  // inputs may have moved to casts since
      const tandem::OpKind kind = g_.op_kind(n.id);
      if (convertible(n, kind)) {
        convert(n, kind);
        ++report.converted;
      } else if (widenable(n, kind)) {
        for (size_t i = 0; i < wide_operands(kind); ++i) g_.set_input(n.id, i, lowered(n.inputs[i], n));
        ++report.wide;
      }
    }
    report.casts = remove_unused_up_casts();
    report.casts += down_.size();
    return report;
  }

 private:
  // Values whose identity or dtype others rely on (see the file comment).
  void find_protected(const std::vector<NodeView>& nodes) {
    std::map<tdm_value_id, int> readers;
    for (const NodeView& n : nodes)
      for (tdm_value_id v : n.inputs) ++readers[v];
    std::map<tdm_value_id, const NodeView*> producer;
    for (const NodeView& n : nodes)
      for (tdm_value_id v : n.outputs) producer[v] = &n;
    for (const NodeView& n : nodes) {
      // The logits, also through the reshapes of a per-token loss ([B, T, V]
      // as [B·T, V]), back to the head that computes them.
      if (n.op == "softmax_cross_entropy")
        for (tdm_value_id v = n.inputs.at(0); v != TDM_NO_VALUE;) {
          protected_.insert(v);
          const auto p = producer.find(v);
          const bool view = p != producer.end() && g_.op_kind(p->second->id).is(TDM_OP_VIEW);
          v = view ? p->second->inputs.at(0) : TDM_NO_VALUE;
        }
      for (tdm_value_id v : n.outputs) {
        const ValueView value = g_.value(v);
        if (value.kind == TDM_VALUE_GRADIENT) protected_.insert(v);
        if (readers[v] == 0) protected_.insert(v);  // a run output (loss) or unused
      }
    }
  }

  bool convertible(const NodeView& n, const tandem::OpKind& kind) const {
    const bool low = kind.is(TDM_OP_AMP_LOW) || (dtype_ == TDM_BF16 && kind.is(TDM_OP_AMP_BF16));
    if (n.phase == TDM_PHASE_OPTIMIZER || !low) return false;
    bool any_f32 = false;
    for (tdm_value_id v : n.outputs) {
      if (protected_.count(v) > 0) return false;
      any_f32 = any_f32 || g_.value(v).dtype == TDM_F32;
    }
    for (tdm_value_id v : n.inputs) {
      if (v == TDM_NO_VALUE) continue;
      const tdm_dtype t = g_.value(v).dtype;
      if (is_float(t) && t != TDM_F32 && up_source_.count(v) == 0) return false;  // f64 runs stay as they are
    }
    return any_f32;
  }

  // A product kept in f32 (above) whose operands are f32 values.
  bool widenable(const NodeView& n, const tandem::OpKind& kind) const {
    const size_t operands = wide_operands(kind);
    if (!wide_ || n.phase == TDM_PHASE_OPTIMIZER || operands == 0 || n.inputs.size() < operands) return false;
    for (tdm_value_id v : n.outputs) {
      const ValueView out = g_.value(v);
      if (out.dtype != TDM_F32 || (out.kind == TDM_VALUE_GRADIENT && !wide_gradients_)) return false;
    }
    for (size_t i = 0; i < operands; ++i)
      if (n.inputs[i] == TDM_NO_VALUE || g_.value(n.inputs[i]).dtype != TDM_F32) return false;
    return true;
  }

  // The compute-dtype version of f32 value `v`, cast once and shared by
  // every converted reader (a weight is cast once per step for forward and
  // backward).
  tdm_value_id lowered(tdm_value_id v, const NodeView& reader) {
    if (auto up = up_source_.find(v); up != up_source_.end()) return up->second;
    if (auto d = down_.find(v); d != down_.end()) return d->second;
    const ValueView value = g_.value(v);
    GraphEdit::Spec cast;
    cast.op = "cast";
    cast.name = g_.fresh_name("amp.cast." + value.name + "." + dtype_name(dtype_));
    cast.layer = reader.layer;
    cast.phase = reader.phase;
    cast.inputs = {v};
    ValueView out = value;
    out.dtype = dtype_;
    cast.outputs = {out};
    cast.anchor = reader.id;
    const tdm_value_id low = g_.output(g_.insert(cast), 0);
    down_[v] = low;
    return low;
  }

  void convert(const NodeView& n, const tandem::OpKind& kind) {
    GraphEdit::Spec low;
    low.op = n.op;
    low.name = g_.fresh_name(n.name + "." + dtype_name(dtype_));
    low.layer = n.layer;
    low.phase = n.phase;
    low.attrs = g_.attrs(n.id);
    low.anchor = n.id;
    const tandem::OpKind& keep = kind;  // its f32 slots stay f32
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const tdm_value_id v = n.inputs[i];
      const bool f32 = v != TDM_NO_VALUE && g_.value(v).dtype == TDM_F32 && !has_bit(keep.f32_inputs, i);
      low.inputs.push_back(f32 ? lowered(v, n) : v);
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      ValueView out = g_.value(n.outputs[i]);
      if (out.dtype == TDM_F32 && !has_bit(keep.f32_outputs, i)) out.dtype = dtype_;
      low.outputs.push_back(out);
    }
    const char* inplace = g_.annotation(n.id, "tandem.inplace");
    const std::string inplace_copy = inplace != nullptr ? inplace : "";
    const tdm_node_id id = g_.insert(low);
    if (!inplace_copy.empty()) g_.annotate(id, "tandem.inplace", inplace_copy.c_str());
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const tdm_value_id produced = g_.output(id, i);
      if (g_.value(n.outputs[i]).dtype != TDM_F32 || has_bit(keep.f32_outputs, i)) {
        g_.replace_uses(n.outputs[i], produced, -1);
        continue;
      }
      // f32 readers (and the trainer's checks) get a cast back; converted
      // readers take `produced` directly through up_source_.
      GraphEdit::Spec up;
      up.op = "cast";
      up.name = g_.fresh_name(n.name + ".to_f32" + (i > 0 ? std::to_string(i) : ""));
      up.layer = n.layer;
      up.phase = n.phase;
      up.inputs = {produced};
      up.outputs = {g_.value(n.outputs[i])};
      up.anchor = n.id;
      const tdm_node_id up_id = g_.insert(up);
      const tdm_value_id f32 = g_.output(up_id, 0);
      up_source_[f32] = produced;
      up_nodes_.push_back(up_id);
      g_.replace_uses(n.outputs[i], f32, -1);
    }
    g_.remove(n.id);
  }

  // Casts back to f32 whose every reader was converted afterwards.
  size_t remove_unused_up_casts() {
    std::set<tdm_value_id> read;
    for (const NodeView& n : g_.nodes()) read.insert(n.inputs.begin(), n.inputs.end());
    size_t kept = 0;
    for (tdm_node_id id : up_nodes_) {
      if (read.count(g_.output(id, 0)) == 0)
        g_.remove(id);
      else
        ++kept;
    }
    return kept;
  }

  GraphEdit& g_;
  tdm_dtype dtype_;
  bool wide_, wide_gradients_;
  std::set<tdm_value_id> protected_;
  std::map<tdm_value_id, tdm_value_id> down_;       // f32 value -> its compute-dtype cast
  std::map<tdm_value_id, tdm_value_id> up_source_;  // f32 cast-back -> the compute-dtype value
  std::vector<tdm_node_id> up_nodes_;
};

}  // namespace

AutocastReport autocast(GraphEdit& graph, tdm_dtype dtype, bool wide_products, bool wide_gradients) {
  return Autocast(graph, dtype, wide_products, wide_gradients).run();
}

}  // namespace amp
