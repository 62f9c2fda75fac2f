// Transformer layers (transformer_layers.hpp). The attention layer owns its
// q/k/v and output projections: per token, x [B·T, C] · W_qᵀ gives the H
// query heads and W_k, W_v the G key/value heads (G = kv_heads divides H);
// heads move next to the batch ([B, H, T, head_dim]) for the catalog's
// attention op, optionally after rotary position embedding, and come back
// the same way through the output projection. Where the graph allows it
// (ModelGraph::attention_tokens_first), attention reads them where the
// projections put them instead ([B, T, H, head_dim], layout "bthd"): no
// transposes.
#include "lowering/transformer_layers.hpp"

#include "lowering/lora.hpp"
#include "lowering/lora_base.hpp"
#include "ops/op_table.hpp"

namespace tandem::host::lowering::detail {

namespace {

using model::LayerSpec;

Initializer projection_init(const LayerSpec& l, int64_t in, int64_t out) {
  // GPT-2's normal(0, 0.02) unless the model file says otherwise.
  return Initializer{l.string_attr("init", "normal"), in, out, l.float_attr("init_std", 0.02)};
}

Result<ValueId> reshape(Context& ctx, ValueId x, Dims to, const std::string& name) {
  auto y = ctx.emit("reshape", name, {x}, {}, {TensorType{ctx.value(x).type.dtype, std::move(to)}});
  if (!y) return y.error();
  return (*y)[0];
}

// Whether this attention layer's heads are split over the tensor-parallel ranks.
bool heads_split(const Context& ctx) {
  return ctx.out.tensor_parallel.size > 1 && ctx.layer->string_attr("parallel", "none") == "heads";
}

// y = x·Wᵀ (+ b) on token rows x [N, in], with parameters "<layer>.<what>.weight/bias"
// of `out` rows; with heads split, this rank's slice of them (column-parallel).
Result<ValueId> projection(Context& ctx, ValueId x, const std::string& what, int64_t out, bool bias) {
  const LayerSpec& l = *ctx.layer;
  const int64_t in = ctx.dims(x)[1], ranks = heads_split(ctx) ? ctx.out.tensor_parallel.size : 1;
  auto w = ranks > 1 ? ctx.sharded_parameter(what + ".weight", {out, in}, 0, projection_init(l, in, out))
                     : projection_weight(ctx, what + ".weight", {out, in}, projection_init(l, in, out));
  if (!w) return w.error();
  std::vector<ValueId> inputs = {x, *w};
  if (bias) {
    auto b = ranks > 1 ? ctx.sharded_parameter(what + ".bias", {out}, 0, {"zeros"})
                       : ctx.parameter(what + ".bias", {out}, {"zeros"});
    if (!b) return b.error();
    inputs.push_back(*b);
  }
  auto y = ctx.emit("linear", l.name + "." + what, inputs, {}, {ctx.tensor({ctx.dims(x)[0], out / ranks})});
  if (!y) return y.error();
  if (lora_target(ctx, l.name + "." + what)) return add_lora(ctx, x, (*y)[0], what + ".");
  return (*y)[0];
}

// The rope op's attributes from the layer's; the scaling ones only when
// asked for, so a backend older than them (ABI 1.14) still runs plain rope.
std::vector<Attr> rope_attrs(const model::LayerSpec& l) {
  std::vector<Attr> attrs = {{"base", l.float_attr("rope_base", 10000.0)}};
  if (l.string_attr("rope_scaling", "none") == "none") return attrs;
  attrs.push_back({"scaling", l.string_attr("rope_scaling", "none")});
  attrs.push_back({"factor", l.float_attr("rope_factor", 1.0)});
  attrs.push_back({"low_freq_factor", l.float_attr("rope_low_freq_factor", 1.0)});
  attrs.push_back({"high_freq_factor", l.float_attr("rope_high_freq_factor", 4.0)});
  attrs.push_back({"original_context", l.int_attr("rope_original_context", 8192)});
  return attrs;
}

// Token rows [B·T, heads·hd] -> [B, heads, T, hd] (and rope when asked).
Result<ValueId> to_heads(Context& ctx, ValueId rows, int64_t B, int64_t T, int64_t heads, int64_t hd,
                         const std::string& what, bool rope) {
  const std::string base = ctx.layer->name + "." + what;
  auto split = reshape(ctx, rows, {B, T, heads, hd}, base + ".split");
  if (!split) return split;
  auto t = ctx.emit("transpose", base + ".heads", {*split}, {{"perm", Dims{0, 2, 1, 3}}},
                    {ctx.tensor({B, heads, T, hd})});
  if (!t) return t.error();
  if (!rope) return (*t)[0];
  // Decoding, the one row is at the new token's position (kNoValue otherwise:
  // rows are positions 0, 1, ...).
  auto r = ctx.emit("rope", base + ".rope", {(*t)[0], ctx.out.decode_position}, rope_attrs(*ctx.layer),
                    {ctx.tensor({B, heads, T, hd})});
  if (!r) return r.error();
  return (*r)[0];
}

// The output projection when this rank holds H/n heads: its columns of W_out
// [C, H·hd] give a partial product, summed over the ranks, then the bias.
Result<ValueId> row_parallel_out(Context& ctx, ValueId merged, int64_t C, bool bias) {
  const std::string& name = ctx.layer->name;
  const int n = ctx.out.tensor_parallel.size;
  const int64_t rows = ctx.dims(merged)[0], local = ctx.dims(merged)[1];
  auto w = ctx.sharded_parameter("out.weight", {C, local * n}, 1, projection_init(*ctx.layer, local * n, C));
  if (!w) return w.error();
  auto partial = ctx.emit("linear", name + ".out.partial", {merged, *w}, {}, {ctx.tensor({rows, C})});
  if (!partial) return partial.error();
  auto sum =
      ctx.emit(ops::kAllReduce, name + ".out.all_reduce", {(*partial)[0]}, {}, {ctx.tensor({rows, C})});
  if (!sum) return sum.error();
  if (!bias) return (*sum)[0];
  auto b = ctx.parameter("out.bias", {C}, {"zeros"});
  if (!b) return b.error();
  auto y = ctx.emit("add", name + ".out", {(*sum)[0], *b}, {}, {ctx.tensor({rows, C})});
  if (!y) return y.error();
  return (*y)[0];
}

// The heads [B, H, T, hd] (or [B, T, H, hd] when `tokens_first`) back to
// token vectors [B, T, C] through the output projection.
Result<ValueId> merge_heads(Context& ctx, ValueId o, int64_t B, int64_t T, int64_t H, int64_t hd, int64_t C,
                            bool bias, bool tokens_first = false) {
  const std::string& name = ctx.layer->name;
  if (!tokens_first) {
    auto back = ctx.emit("transpose", name + ".merge", {o}, {{"perm", Dims{0, 2, 1, 3}}},
                         {ctx.tensor({B, T, H, hd})});
    if (!back) return back.error();
    o = (*back)[0];
  }
  auto merged = reshape(ctx, o, {B * T, H * hd}, name + ".concat_heads");
  if (!merged) return merged;
  auto y =
      heads_split(ctx) ? row_parallel_out(ctx, *merged, C, bias) : projection(ctx, *merged, "out", C, bias);
  if (!y) return y;
  return back_to_tokens(ctx, *y, B, T, name);
}

// Decoding: the new token's key and value follow the cached ones (inputs
// "<layer>.k_cache", "<layer>.v_cache" [1, G, context - 1, hd]), and the
// query attends to every slot the mask leaves open.
Result<ValueId> attend_cached(Context& ctx, ValueId q, ValueId k, ValueId v, int64_t G, int64_t hd) {
  const std::string& name = ctx.layer->name;
  const int64_t slots = ctx.spec.input_shape.at(0), H = ctx.dims(q)[1];
  ModelGraph::KvCache cache{name, kNoValue, kNoValue, k, v};
  std::vector<ValueId> all = {k, v};
  if (slots > 1)
    for (int i = 0; i < 2; ++i) {
      const std::string what = i == 0 ? ".k_cache" : ".v_cache";
      auto c = ctx.out.graph.add_value(name + what, TDM_VALUE_INPUT, ctx.tensor({1, G, slots - 1, hd}));
      if (!c) return c.error();
      (i == 0 ? cache.k_cache : cache.v_cache) = *c;
      auto joined = ctx.emit("concat", name + what + ".append", {*c, all[size_t(i)]}, {{"axis", int64_t{2}}},
                             {ctx.tensor({1, G, slots, hd})});
      if (!joined) return joined.error();
      all[size_t(i)] = (*joined)[0];
    }
  ctx.out.caches.push_back(cache);
  auto o = ctx.emit(
      "attention", name + ".attention", {q, all[0], all[1], ctx.out.decode_mask, kNoValue},
      {{"causal", int64_t{0}}},
      {ctx.tensor({1, H, 1, hd}), TensorType{ctx.out.dtype == TDM_F64 ? TDM_F64 : TDM_F32, {1, H, 1}}});
  if (!o) return o.error();
  return (*o)[0];
}

}  // namespace

Result<ValueId> token_rows(Context& ctx, ValueId x, const std::string& node_name) {
  const Dims& d = ctx.dims(x);
  return reshape(ctx, x, {d[0] * d[1], d[2]}, node_name);
}

Result<ValueId> back_to_tokens(Context& ctx, ValueId rows, int64_t batch, int64_t context,
                               const std::string& node_name) {
  auto y = ctx.emit("reshape", node_name, {rows}, {}, {ctx.tensor({batch, context, ctx.dims(rows)[1]})},
                    {node_name});
  if (!y) return y.error();
  return (*y)[0];
}

Result<ValueId> rms_norm(Context& ctx, ValueId x) {
  const Dims& d = ctx.dims(x);
  auto gamma = ctx.parameter("gamma", {d.back()}, {"ones"});
  if (!gamma) return gamma.error();
  const std::string& n = ctx.layer->name;
  auto y = ctx.emit("rms_norm", n, {x, *gamma}, {{"epsilon", ctx.layer->float_attr("epsilon", 1e-6)}},
                    {ctx.value(x).type, ctx.tensor(Dims(d.begin(), d.end() - 1))}, {n, n + ".rstd"});
  if (!y) return y.error();
  return (*y)[0];
}

// Learned absolute positions (GPT-2): y[b, t] = x[b, t] + table[t].
Result<ValueId> position_embedding(Context& ctx, ValueId x) {
  const Dims& d = ctx.dims(x);
  if (d.size() != 3)
    return ctx.error("needs token vectors [batch, context, features], got " + dims_str(d) +
                     ": put it after the token embedding");
  const int64_t most = ctx.layer->int_attr("max_positions", d[1]);
  if (most < d[1])
    return ctx.error("max_positions = " + std::to_string(most) + " is less than the context " +
                     std::to_string(d[1]));
  const bool decode = ctx.out.mode == Mode::Decode;
  const int64_t positions = decode ? ctx.spec.input_shape.at(0) : d[1];
  auto table = ctx.parameter("weight", {positions, d[2]},
                             Initializer{ctx.layer->string_attr("init", "normal"), positions, d[2],
                                         ctx.layer->float_attr("init_std", 0.02)});
  if (!table) return table.error();
  if (decode) {  // the new token's row of the table, [1, C], broadcast over [1, 1, C]
    auto row = ctx.emit("embedding", ctx.layer->name + ".row", {*table, ctx.out.decode_position_index}, {},
                        {ctx.tensor({1, d[2]})});
    if (!row) return row.error();
    auto y = ctx.emit("add", ctx.layer->name, {x, (*row)[0]}, {}, {ctx.value(x).type}, {ctx.layer->name});
    if (!y) return y.error();
    return (*y)[0];
  }
  auto y = ctx.emit("add", ctx.layer->name, {x, *table}, {}, {ctx.value(x).type}, {ctx.layer->name});
  if (!y) return y.error();
  return (*y)[0];
}

Result<ValueId> attention(Context& ctx, ValueId x) {
  const LayerSpec& l = *ctx.layer;
  const Dims d = ctx.dims(x);
  if (d.size() != 3) return ctx.error("needs token vectors [batch, context, features], got " + dims_str(d));
  const int64_t B = d[0], T = d[1], C = d[2], H = l.int_attr("heads", 1), G = l.int_attr("kv_heads", H);
  if (H < 1 || G < 1 || H % G != 0)
    return ctx.error("kv_heads = " + std::to_string(G) + " must divide heads = " + std::to_string(H));
  if (!l.attrs.count("head_dim") && C % H != 0)
    return ctx.error("the " + std::to_string(C) + " features do not split into " + std::to_string(H) +
                     " heads: choose heads dividing them, or give head_dim");
  const int64_t hd = l.int_attr("head_dim", C / H);
  const bool bias = l.bool_attr("bias", true), rope = l.bool_attr("rope", false);
  const bool out_bias = l.bool_attr("out_bias", bias);
  if (rope && hd % 2 != 0) return ctx.error("rope needs an even head_dim, got " + std::to_string(hd));
  const bool scaled = l.string_attr("rope_scaling", "none") != "none";
  if (scaled && !rope) return ctx.error("rope_scaling needs rope = true");
  for (const char* key :
       {"rope_factor", "rope_low_freq_factor", "rope_high_freq_factor", "rope_original_context"})
    if (!scaled && l.attrs.count(key))
      return ctx.error(std::string(key) + " applies to rope_scaling = \"llama3\" only: set it, or remove " +
                       key);
  if (scaled && !(l.float_attr("rope_high_freq_factor", 4.0) > l.float_attr("rope_low_freq_factor", 1.0)))
    return ctx.error("rope_scaling = \"llama3\" needs rope_high_freq_factor above rope_low_freq_factor");
  const int n = heads_split(ctx) ? ctx.out.tensor_parallel.size : 1;
  if (H % n != 0 || G % n != 0)
    return ctx.error("parallel = \"heads\": heads = " + std::to_string(H) + " and kv_heads = " +
                     std::to_string(G) + " must be multiples of the " + std::to_string(n) + " ranks");
  auto rows = token_rows(ctx, x, l.name + ".tokens");
  if (!rows) return rows;
  if (n > 1) {  // every rank reads all of x; its gradient sums over the ranks' heads
    auto copy =
        ctx.emit(ops::kCopyToParallel, l.name + ".copy_to_parallel", {*rows}, {}, {ctx.value(*rows).type});
    if (!copy) return copy.error();
    rows = (*copy)[0];
  }
  auto q = projection(ctx, *rows, "q", H * hd, bias);
  auto k = projection(ctx, *rows, "k", G * hd, bias);
  auto v = projection(ctx, *rows, "v", G * hd, bias);
  if (!q || !k || !v) return !q ? q : !k ? k : v;
  const int64_t Hl = H / n, Gl = G / n;  // this rank's heads
  // Decoding and `tandem generate` (which fills its cache from an evaluation
  // graph) keep the key/value caches heads first, and rope indexes the
  // positions at axis 2: those keep the transposes.
  const bool tokens_first = ctx.out.attention_tokens_first && ctx.out.mode == Mode::Train && !rope;
  auto split = [&](ValueId rows, int64_t heads, const char* what, bool with_rope) {
    return tokens_first ? reshape(ctx, rows, {B, T, heads, hd}, l.name + "." + what + ".split")
                        : to_heads(ctx, rows, B, T, heads, hd, what, with_rope);
  };
  auto qh = split(*q, Hl, "q", rope);
  auto kh = split(*k, Gl, "k", rope);
  auto vh = split(*v, Gl, "v", false);
  if (!qh || !kh || !vh) return !qh ? qh : !kh ? kh : vh;
  if (ctx.out.mode == Mode::Decode) {
    auto o = attend_cached(ctx, *qh, *kh, *vh, Gl, hd);
    if (!o) return o;
    return merge_heads(ctx, *o, B, T, Hl, hd, C, out_bias);
  }
  if (!(l.float_attr("dropout", 0.0) < 1)) return ctx.error("dropout must be in [0, 1)");
  // Evaluation graphs name each layer's keys and values, for `tandem
  // generate` to fill its cache from a whole window at once.
  if (ctx.out.mode == Mode::Eval) ctx.out.caches.push_back({l.name, kNoValue, kNoValue, *kh, *vh});
  const double p = ctx.out.mode == Mode::Train ? l.float_attr("dropout", 0.0) : 0.0;
  std::vector<Attr> attrs = {{"causal", int64_t(l.bool_attr("causal", true))}};
  if (tokens_first) attrs.push_back({"layout", std::string("bthd")});
  ValueId step = kNoValue;
  if (p > 0) {
    auto s = ctx.dropout_step();
    if (!s) return s;
    step = *s;
    attrs.push_back({"dropout", p});
    attrs.push_back({"seed", ctx.dropout_seed(heads_split(ctx))});
  }
  auto o = ctx.emit("attention", l.name + ".attention", {*qh, *kh, *vh, kNoValue, step}, attrs,
                    {ctx.tensor(tokens_first ? Dims{B, T, Hl, hd} : Dims{B, Hl, T, hd}),
                     TensorType{ctx.out.dtype == TDM_F64 ? TDM_F64 : TDM_F32, {B, Hl, T}}});
  if (!o) return o.error();
  if (p > 0) ctx.out.dropout_nodes.push_back(ctx.value((*o)[0]).producer);
  return merge_heads(ctx, (*o)[0], B, T, Hl, hd, C, out_bias, tokens_first);
}

}  // namespace tandem::host::lowering::detail
