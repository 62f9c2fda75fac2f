// Expansion of each model-file layer into catalog ops, with shape inference.
#include <cmath>

#include "lowering/model_graph_layers.hpp"

#include "lowering/int8_layers.hpp"
#include "lowering/lora.hpp"
#include "lowering/lora_base.hpp"
#include "lowering/transformer_layers.hpp"
#include "ops/op_table.hpp"
#include "tandem/op_catalog.hpp"

namespace tandem::host::lowering::detail {
namespace {

using model::LayerSpec;

std::string shape_of(const Context& ctx, ValueId v) {
  return "'" + ctx.value(v).name + "' " + dims_str(ctx.dims(v));
}

Initializer weight_init(const LayerSpec& l, const std::string& key, const std::string& fallback,
                        int64_t fan_in, int64_t fan_out) {
  return Initializer{l.string_attr(key, fallback), fan_in, fan_out, l.float_attr("init_std", 0.01)};
}

// [B, ...] -> [B, prod(...)], or the value itself when already rank 2.
Result<ValueId> flatten(Context& ctx, ValueId x, const std::string& node_name) {
  const Dims& d = ctx.dims(x);
  if (d.size() == 2) return x;
  auto out = ctx.emit("reshape", node_name, {x}, {}, {ctx.tensor({d[0], numel(d) / d[0]})},
                      {node_name == ctx.layer->name ? node_name : ""});
  if (!out) return out.error();
  return (*out)[0];
}

// Megatron-LM's column-parallel linear: this rank holds rows
// [rank*F/N, (rank+1)*F/N) of W and b and computes that slice of y; the
// input's gradient sums over ranks (comm.copy_to_parallel). With
// gather_output (the default) the slices are gathered into the whole y.
Result<ValueId> column_linear(Context& ctx, ValueId x) {
  const LayerSpec& l = *ctx.layer;
  const int n = ctx.out.tensor_parallel.size;
  const int64_t batch = ctx.dims(x)[0], in = ctx.dims(x)[1], out = l.int_attr("out_features", 0);
  if (out <= 0 || out % n != 0)
    return ctx.error("column-parallel: out_features = " + std::to_string(out) +
                     " must be a positive multiple of the " + std::to_string(n) + " ranks");
  auto w = ctx.sharded_parameter("weight", {out, in}, 0, weight_init(l, "init", "kaiming", in, out));
  if (!w) return w.error();
  auto xp = ctx.emit(ops::kCopyToParallel, l.name + ".copy_to_parallel", {x}, {}, {ctx.value(x).type});
  if (!xp) return xp.error();
  std::vector<ValueId> inputs = {(*xp)[0], *w};
  if (l.bool_attr("bias", true)) {
    auto b = ctx.sharded_parameter("bias", {out}, 0, weight_init(l, "bias_init", "zeros", in, out));
    if (!b) return b.error();
    inputs.push_back(*b);
  }
  const bool gather = l.bool_attr("gather_output", true);
  const std::string local_name = gather ? l.name + ".local" : l.name;
  auto y = ctx.emit("linear", local_name, inputs, {{"activation", l.string_attr("activation", "none")}},
                    {ctx.tensor({batch, out / n})}, {local_name});
  if (!y) return y.error();
  if (!gather) {
    ctx.out.split_activations.insert((*y)[0]);
    return (*y)[0];
  }
  auto all =
      ctx.emit(ops::kAllGather, l.name + ".all_gather", {(*y)[0]}, {}, {ctx.tensor({n, batch, out / n})});
  if (!all) return all.error();
  auto t = ctx.emit("transpose", l.name + ".interleave", {(*all)[0]}, {{"perm", Dims{1, 0, 2}}},
                    {ctx.tensor({batch, n, out / n})});
  if (!t) return t.error();
  auto whole = ctx.emit("reshape", l.name, {(*t)[0]}, {}, {ctx.tensor({batch, out})}, {l.name});
  if (!whole) return whole.error();
  return (*whole)[0];
}

// Megatron-LM's row-parallel linear: this rank holds columns
// [rank*K/N, (rank+1)*K/N) of W and multiplies its slice of x; the partial
// products are summed over ranks (comm.all_reduce), then the bias (whole on
// every rank) and the activation apply. x is either already split (after a
// column-parallel linear without gather_output) or whole, and then sliced.
Result<ValueId> row_linear(Context& ctx, ValueId x) {
  const LayerSpec& l = *ctx.layer;
  const int n = ctx.out.tensor_parallel.size;
  const bool split = ctx.out.split_activations.count(x) > 0;
  const int64_t batch = ctx.dims(x)[0], out = l.int_attr("out_features", 0);
  const int64_t in = split ? ctx.dims(x)[1] * n : ctx.dims(x)[1];
  if (out <= 0) return ctx.error("out_features must be positive");
  if (in % n != 0)
    return ctx.error("row-parallel: its " + std::to_string(in) +
                     " input features must be a multiple of the " + std::to_string(n) + " ranks");
  ValueId local = x;
  if (!split) {
    auto r = ctx.emit("reshape", l.name + ".split", {x}, {}, {ctx.tensor({batch, n, in / n})});
    if (!r) return r.error();
    auto t = ctx.emit("transpose", l.name + ".rank_major", {(*r)[0]}, {{"perm", Dims{1, 0, 2}}},
                      {ctx.tensor({n, batch, in / n})});
    if (!t) return t.error();
    auto c = ctx.emit(ops::kChunk, l.name + ".chunk", {(*t)[0]}, {}, {ctx.tensor({batch, in / n})});
    if (!c) return c.error();
    local = (*c)[0];
  }
  auto w = ctx.sharded_parameter("weight", {out, in}, 1, weight_init(l, "init", "kaiming", in, out));
  if (!w) return w.error();
  auto partial = ctx.emit("linear", l.name + ".partial", {local, *w}, {{"activation", std::string("none")}},
                          {ctx.tensor({batch, out})});
  if (!partial) return partial.error();
  const std::string activation = l.string_attr("activation", "none");
  const bool bias = l.bool_attr("bias", true);
  const bool last = !bias && activation == "none";
  auto sum = ctx.emit(ops::kAllReduce, l.name + ".all_reduce", {(*partial)[0]}, {},
                      {ctx.tensor({batch, out})}, {last ? l.name : ""});
  if (!sum) return sum.error();
  ValueId y = (*sum)[0];
  if (bias) {
    auto b = ctx.parameter("bias", {out}, weight_init(l, "bias_init", "zeros", in, out));
    if (!b) return b.error();
    const std::string name = activation == "none" ? l.name : l.name + ".biased";
    auto added = ctx.emit("add", name, {y, *b}, {}, {ctx.tensor({batch, out})}, {name});
    if (!added) return added.error();
    y = (*added)[0];
  }
  if (activation == "none") return y;
  auto act = ctx.emit(activation, l.name, {y}, {}, {ctx.tensor({batch, out})}, {l.name});
  if (!act) return act.error();
  return (*act)[0];
}

// The weight [out, in] of a linear layer: its own, or with tie_weight =
// "<embedding layer>" that layer's table [V, C] (GPT-2's tied output head),
// one tensor that both layers train.
Result<ValueId> linear_weight(Context& ctx, int64_t in, int64_t out) {
  const LayerSpec& l = *ctx.layer;
  const std::string tied = l.string_attr("tie_weight", "");
  if (tied.empty())
    return projection_weight(ctx, "weight", {out, in}, weight_init(l, "init", "kaiming", in, out));
  const Value* found = ctx.out.graph.value_by_name(tied + ".weight");
  if (found == nullptr || found->kind != TDM_VALUE_PARAMETER)
    return ctx.error("tie_weight = \"" + tied + "\" names no earlier embedding layer with a weight");
  auto table = ctx.gathered(found->id);  // ZeRO stage 3: gathered again here
  if (!table) return table;
  if (ctx.dims(*table) != Dims{out, in})
    return ctx.error("tie_weight: '" + tied + ".weight' is " + dims_str(ctx.dims(*table)) +
                     " but this layer's weight is [" + std::to_string(out) + "," + std::to_string(in) +
                     "] (out_features, input features)");
  return table;
}

Result<ValueId> linear(Context& ctx, ValueId x_in) {
  const LayerSpec& l = *ctx.layer;
  const std::string parallel =
      ctx.out.tensor_parallel.size > 1 ? l.string_attr("parallel", "none") : std::string("none");
  // In a language model a linear layer acts on each token (over the last
  // dim), as torch.nn.Linear does; elsewhere it flattens [B, ...] first.
  const bool per_token = ctx.spec.language_model() && ctx.dims(x_in).size() == 3;
  if (parallel == "row" && ctx.out.split_activations.count(x_in) > 0) {
    auto y = row_linear(ctx, x_in);
    // A language model's token rows [B·T, F/n] (after a column-parallel
    // linear without gather) come back whole, as tokens.
    if (!y || !ctx.spec.language_model()) return y;
    return back_to_tokens(ctx, *y, ctx.out.batch, ctx.dims(*y)[0] / ctx.out.batch, l.name + ".per_token");
  }
  if (parallel != "none" && !l.string_attr("tie_weight", "").empty())
    return ctx.error(
        "a tied weight (tie_weight) cannot be split over ranks: leave out parallel on this layer");
  if (parallel != "none") {
    auto x = per_token ? token_rows(ctx, x_in, l.name + ".tokens") : flatten(ctx, x_in, l.name + ".flatten");
    if (!x) return x.error();
    auto y = parallel == "row" ? row_linear(ctx, *x) : column_linear(ctx, *x);
    if (!y || !per_token || ctx.out.split_activations.count(*y) > 0) return y;  // a slice of rows stays rows
    return back_to_tokens(ctx, *y, ctx.dims(x_in)[0], ctx.dims(x_in)[1], l.name + ".per_token");
  }
  auto x = per_token ? token_rows(ctx, x_in, l.name + ".tokens") : flatten(ctx, x_in, l.name + ".flatten");
  if (!x) return x.error();
  if (ctx.int8 != nullptr)
    if (const auto q = ctx.int8->find(l.name); q != ctx.int8->end()) {
      auto y = linear_int8(ctx, *x, q->second);
      if (!y || !per_token) return y;
      return back_to_tokens(ctx, *y, ctx.dims(x_in)[0], ctx.dims(x_in)[1], l.name + ".per_token");
    }
  const int64_t in = ctx.dims(*x)[1], out = l.int_attr("out_features", 0);
  if (out <= 0) return ctx.error("out_features must be positive");
  auto w = linear_weight(ctx, in, out);
  if (!w) return w.error();
  std::vector<ValueId> inputs = {*x, *w};
  if (l.bool_attr("bias", true)) {
    auto b = ctx.parameter("bias", {out}, weight_init(l, "bias_init", "zeros", in, out));
    if (!b) return b.error();
    inputs.push_back(*b);
  }
  const bool adapted = lora_target(ctx, l.name);
  if (adapted && l.string_attr("activation", "none") != "none")
    return ctx.error("a LoRA adapter adds before the activation: give the activation its own layer");
  const std::string name = per_token || adapted ? l.name + ".rows" : l.name;
  auto y = ctx.emit("linear", name, inputs, {{"activation", l.string_attr("activation", "none")}},
                    {ctx.tensor({ctx.dims(*x)[0], out})}, {name});
  if (!y) return y.error();
  ValueId rows = (*y)[0];
  if (adapted) {
    auto sum = add_lora(ctx, *x, rows, "", per_token ? "" : l.name);
    if (!sum) return sum;
    rows = *sum;
  }
  if (!per_token) return rows;
  return back_to_tokens(ctx, rows, ctx.dims(x_in)[0], ctx.dims(x_in)[1], l.name);
}

Result<ValueId> conv2d(Context& ctx, ValueId x) {
  const LayerSpec& l = *ctx.layer;
  const Dims& d = ctx.dims(x);
  if (d.size() != 4)
    return ctx.error("needs an NCHW input [batch, channels, height, width], got " + shape_of(ctx, x));
  const Dims k = l.ints_attr("kernel", {1, 1}), s = l.ints_attr("stride", {1, 1}),
             p = l.ints_attr("padding", {0, 0}), dil = l.ints_attr("dilation", {1, 1});
  const int64_t groups = l.int_attr("groups", 1), out_c = l.int_attr("out_channels", 0);
  if (groups < 1 || d[1] % groups != 0 || out_c <= 0 || out_c % groups != 0)
    return ctx.error("channels (" + std::to_string(d[1]) + " in, " + std::to_string(out_c) +
                     " out) must be positive and divisible by groups = " + std::to_string(groups));
  const auto oh = window_out(d[2], k[0], s[0], p[0], dil[0]), ow = window_out(d[3], k[1], s[1], p[1], dil[1]);
  if (!oh || !ow)
    return ctx.error("the kernel " + dims_str(k) + " does not fit the input " + shape_of(ctx, x));
  if (ctx.int8 != nullptr)
    if (const auto q = ctx.int8->find(l.name); q != ctx.int8->end())
      return conv2d_int8(ctx, x, q->second,
                         {{"stride", s}, {"padding", p}, {"dilation", dil}, {"groups", groups}},
                         {out_c, d[1] / groups, k[0], k[1]}, {d[0], out_c, *oh, *ow});
  const int64_t fan_in = d[1] / groups * k[0] * k[1], fan_out = out_c / groups * k[0] * k[1];
  auto w = ctx.parameter("weight", {out_c, d[1] / groups, k[0], k[1]},
                         weight_init(l, "init", "kaiming", fan_in, fan_out));
  if (!w) return w.error();
  std::vector<ValueId> inputs = {x, *w};
  if (l.bool_attr("bias", true)) {
    auto b = ctx.parameter("bias", {out_c}, weight_init(l, "bias_init", "zeros", fan_in, fan_out));
    if (!b) return b.error();
    inputs.push_back(*b);
  }
  auto y = ctx.emit("conv2d", l.name, inputs,
                    {{"stride", s}, {"padding", p}, {"dilation", dil}, {"groups", groups}},
                    {ctx.tensor({d[0], out_c, *oh, *ow})}, {l.name});
  if (!y) return y.error();
  return (*y)[0];
}

Result<ValueId> pool(Context& ctx, ValueId x) {
  const LayerSpec& l = *ctx.layer;
  const Dims& d = ctx.dims(x);
  if (d.size() != 4) return ctx.error("needs an NCHW input, got " + shape_of(ctx, x));
  const Dims k = l.ints_attr("kernel", {1, 1}), s = l.ints_attr("stride", k),
             p = l.ints_attr("padding", {0, 0});
  if (p[0] * 2 > k[0] || p[1] * 2 > k[1]) return ctx.error("padding may be at most half the kernel");
  const auto oh = window_out(d[2], k[0], s[0], p[0], 1), ow = window_out(d[3], k[1], s[1], p[1], 1);
  if (!oh || !ow)
    return ctx.error("the window " + dims_str(k) + " does not fit the input " + shape_of(ctx, x));
  std::vector<Attr> attrs = {{"kernel", k}, {"stride", s}, {"padding", p}};
  if (l.op == "avg_pool2d")
    attrs.push_back({"count_include_pad", int64_t(l.bool_attr("count_include_pad", false))});
  auto y = ctx.emit(l.op, l.name, {x}, attrs, {ctx.tensor({d[0], d[1], *oh, *ow})}, {l.name});
  if (!y) return y.error();
  return (*y)[0];
}

Result<ValueId> unary(Context& ctx, ValueId x, const std::string& op, std::vector<Attr> attrs = {}) {
  auto y = ctx.emit(op, ctx.layer->name, {x}, std::move(attrs), {ctx.value(x).type}, {ctx.layer->name});
  if (!y) return y.error();
  return (*y)[0];
}

Result<ValueId> dropout(Context& ctx, ValueId x) {
  const LayerSpec& l = *ctx.layer;
  const double p = l.float_attr("p", 0.5);
  if (!(p >= 0 && p < 1)) return ctx.error("p must be in [0, 1)");
  if (ctx.out.mode != Mode::Train || p == 0) return x;  // identity at evaluation and decoding
  // Each dropout layer gets its own stream of masks (its seed attribute); the
  // host feeds the step as seed_offset, so every step draws new masks.
  const int64_t seed = ctx.dropout_seed(ctx.out.split_activations.count(x) > 0);
  if (auto step = ctx.dropout_step(); !step) return step.error();
  auto y = ctx.emit("dropout", l.name, {x, ctx.out.dropout_step}, {{"p", p}, {"seed", seed}},
                    {ctx.value(x).type, TensorType{TDM_U8, ctx.dims(x)}}, {l.name, l.name + ".mask"});
  if (!y) return y.error();
  ctx.out.dropout_nodes.push_back(ctx.out.graph.value((*y)[0])->producer);
  return (*y)[0];
}

Result<ValueId> batch_norm(Context& ctx, ValueId x) {
  const LayerSpec& l = *ctx.layer;
  const Dims& d = ctx.dims(x);
  if (d.size() < 2) return ctx.error("needs [batch, channels, ...], got " + shape_of(ctx, x));
  const int64_t c = d[1];
  auto gamma = ctx.parameter("gamma", {c}, {"ones"});
  auto beta = ctx.parameter("beta", {c}, {"zeros"});
  auto mean = ctx.state("running_mean", {c}, 0.0);
  auto var = ctx.state("running_var", {c}, 1.0);
  if (!gamma || !beta || !mean || !var)
    return make_error(ctx.who() + ": could not add its tensors", TDM_INTERNAL);
  const double eps = l.float_attr("epsilon", 1e-5);
  if (ctx.out.mode != Mode::Train) {
    auto y = ctx.emit("batch_norm_inference", l.name, {x, *gamma, *beta, *mean, *var}, {{"epsilon", eps}},
                      {ctx.value(x).type}, {l.name});
    if (!y) return y.error();
    return (*y)[0];
  }
  auto y = ctx.emit("batch_norm_train", l.name, {x, *gamma, *beta, *mean, *var},
                    {{"epsilon", eps}, {"momentum", l.float_attr("momentum", 0.1)}},
                    {ctx.value(x).type, ctx.tensor({c}), ctx.tensor({c}), ctx.tensor({c}), ctx.tensor({c})},
                    {l.name, l.name + ".saved_mean", l.name + ".saved_rstd", l.name + ".running_mean_out",
                     l.name + ".running_var_out"});
  if (!y) return y.error();
  return (*y)[0];
}

Result<ValueId> layer_norm(Context& ctx, ValueId x) {
  const Dims& d = ctx.dims(x);
  const int64_t dim = d.back();
  auto gamma = ctx.parameter("gamma", {dim}, {"ones"});
  auto beta = ctx.parameter("beta", {dim}, {"zeros"});
  if (!gamma || !beta) return make_error(ctx.who() + ": could not add its tensors", TDM_INTERNAL);
  const Dims stats(d.begin(), d.end() - 1);
  const std::string& n = ctx.layer->name;
  auto y =
      ctx.emit("layer_norm", n, {x, *gamma, *beta}, {{"epsilon", ctx.layer->float_attr("epsilon", 1e-5)}},
               {ctx.value(x).type, ctx.tensor(stats), ctx.tensor(stats)}, {n, n + ".mean", n + ".rstd"});
  if (!y) return y.error();
  return (*y)[0];
}

Result<ValueId> embedding(Context& ctx, ValueId x) {
  const LayerSpec& l = *ctx.layer;
  const int64_t v = l.int_attr("num_embeddings", 0), dim = l.int_attr("embedding_dim", 0);
  if (v <= 0 || dim <= 0) return ctx.error("num_embeddings and embedding_dim must be positive");
  ValueId indices = x;
  if (ctx.value(x).type.dtype != TDM_S32) {
    auto cast = ctx.emit("cast", l.name + ".indices", {x}, {}, {TensorType{TDM_S32, ctx.dims(x)}});
    if (!cast) return cast.error();
    indices = (*cast)[0];
  }
  // Vocabulary-parallel (Megatron-LM): this rank holds rows [start, start +
  // V/N) of the table, looks up the indices in its range (zeros elsewhere),
  // and the ranks' partial lookups are summed.
  const int n = ctx.out.tensor_parallel.size;
  const bool vocab_parallel = n > 1 && l.string_attr("parallel", "none") == "vocab";
  if (vocab_parallel && v % n != 0)
    return ctx.error("vocabulary-parallel: num_embeddings = " + std::to_string(v) +
                     " must be a multiple of the " + std::to_string(n) + " ranks");
  // Whole on every rank unless vocabulary-parallel (a tensor-parallel run
  // may split other layers only).
  auto table = vocab_parallel
                   ? ctx.sharded_parameter("weight", {v, dim}, 0, weight_init(l, "init", "normal", v, dim))
                   : ctx.parameter("weight", {v, dim}, weight_init(l, "init", "normal", v, dim));
  if (!table) return table.error();
  if (!l.attrs.count("init_std")) ctx.out.initializers[*table].std = 1.0;  // as torch.nn.Embedding
  Dims out = ctx.dims(x);
  out.push_back(dim);
  const int64_t padding = l.int_attr("padding_idx", -1);
  if (!vocab_parallel) {
    auto y = ctx.emit("embedding", l.name, {*table, indices}, {{"padding_idx", padding}}, {ctx.tensor(out)},
                      {l.name});
    if (!y) return y.error();
    return (*y)[0];
  }
  const int64_t rows = v / n, start = ctx.out.tensor_parallel.rank * rows;
  const int64_t local_padding = padding >= start && padding < start + rows ? padding - start : -1;
  auto part = ctx.emit("embedding", l.name + ".local", {*table, indices},
                       {{"padding_idx", local_padding}, {"vocab_start", start}}, {ctx.tensor(out)});
  if (!part) return part.error();
  auto y = ctx.emit(ops::kAllReduce, l.name, {(*part)[0]}, {}, {ctx.tensor(out)}, {l.name});
  if (!y) return y.error();
  return (*y)[0];
}

Result<ValueId> binary_chain(Context& ctx, const std::vector<ValueId>& inputs) {
  ValueId acc = inputs[0];
  for (size_t i = 1; i < inputs.size(); ++i) {
    const auto shape = broadcast(ctx.dims(acc), ctx.dims(inputs[i]));
    if (!shape)
      return ctx.error("inputs " + shape_of(ctx, acc) + " and " + shape_of(ctx, inputs[i]) +
                       " cannot be broadcast together");
    const bool last = i + 1 == inputs.size();
    const std::string name = last ? ctx.layer->name : ctx.layer->name + "." + std::to_string(i);
    auto y = ctx.emit(ctx.layer->op, name, {acc, inputs[i]}, {}, {ctx.tensor(*shape)}, {name});
    if (!y) return y.error();
    acc = (*y)[0];
  }
  return acc;
}

Result<ValueId> concat(Context& ctx, const std::vector<ValueId>& inputs) {
  const auto rank = static_cast<int64_t>(ctx.dims(inputs[0]).size());
  int64_t axis = ctx.layer->int_attr("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 1 || axis >= rank)
    return ctx.error("axis must name a sample dim (1 .. " + std::to_string(rank - 1) + ")");
  Dims out = ctx.dims(inputs[0]);
  out[static_cast<size_t>(axis)] = 0;
  for (ValueId v : inputs) {
    Dims d = ctx.dims(v);
    if (d.size() != out.size()) return ctx.error("inputs have different ranks: " + shape_of(ctx, v));
    for (size_t i = 0; i < d.size(); ++i)
      if (static_cast<int64_t>(i) != axis && d[i] != out[i])
        return ctx.error(shape_of(ctx, inputs[0]) + " and " + shape_of(ctx, v) + " differ outside axis " +
                         std::to_string(axis));
    out[static_cast<size_t>(axis)] += d[static_cast<size_t>(axis)];
  }
  auto y =
      ctx.emit("concat", ctx.layer->name, inputs, {{"axis", axis}}, {ctx.tensor(out)}, {ctx.layer->name});
  if (!y) return y.error();
  return (*y)[0];
}

}  // namespace

namespace {

// A layer kind of the model file (model/layer_schema.cpp) and how it
// lowers to catalog ops.
struct LayerKind {
  std::string_view name;
  Result<ValueId> (*expand)(Context& ctx, const std::vector<ValueId>& inputs);
};

// An activation layer: its op of the same name, with the attributes the
// layer sets (the model file's schema took them from the catalog and
// checked them; the others keep the catalog's defaults).
Result<ValueId> expand_activation(Context& ctx, const std::vector<ValueId>& in) {
  const LayerSpec& l = *ctx.layer;
  std::vector<Attr> attrs;
  for (const catalog::Attribute& a : catalog::find(l.op)->attrs) {
    const auto it = l.attrs.find(a.name);
    if (it == l.attrs.end()) continue;
    if (a.type == TDM_ATTR_STRING) attrs.push_back({a.name, l.string_attr(a.name, a.default_text)});
    if (a.type == TDM_ATTR_FLOAT) attrs.push_back({a.name, l.float_attr(a.name, a.float_default)});
    if (a.type == TDM_ATTR_INT) attrs.push_back({a.name, l.int_attr(a.name, a.int_default)});
    if (a.type == TDM_ATTR_INTS) attrs.push_back({a.name, l.ints_attr(a.name, a.ints_default)});
  }
  return unary(ctx, in[0], l.op, std::move(attrs));
}

std::vector<LayerKind> named_layer_kinds() {
  return {
      {"linear", [](Context& c, const std::vector<ValueId>& in) { return linear(c, in[0]); }},
      {"conv2d", [](Context& c, const std::vector<ValueId>& in) { return conv2d(c, in[0]); }},
      {"max_pool2d", [](Context& c, const std::vector<ValueId>& in) { return pool(c, in[0]); }},
      {"avg_pool2d", [](Context& c, const std::vector<ValueId>& in) { return pool(c, in[0]); }},
      {"softmax",
       [](Context& c, const std::vector<ValueId>& in) {
         return unary(c, in[0], "softmax", {{"axis", int64_t{-1}}});
       }},
      {"flatten",
       [](Context& c, const std::vector<ValueId>& in) { return flatten(c, in[0], c.layer->name); }},
      {"dropout", [](Context& c, const std::vector<ValueId>& in) { return dropout(c, in[0]); }},
      {"batch_norm", [](Context& c, const std::vector<ValueId>& in) { return batch_norm(c, in[0]); }},
      {"layer_norm", [](Context& c, const std::vector<ValueId>& in) { return layer_norm(c, in[0]); }},
      {"rms_norm", [](Context& c, const std::vector<ValueId>& in) { return rms_norm(c, in[0]); }},
      {"position_embedding",
       [](Context& c, const std::vector<ValueId>& in) { return position_embedding(c, in[0]); }},
      {"attention", [](Context& c, const std::vector<ValueId>& in) { return attention(c, in[0]); }},
      {"embedding", [](Context& c, const std::vector<ValueId>& in) { return embedding(c, in[0]); }},
      {"add", binary_chain},
      {"mul", binary_chain},
      {"concat", concat},
  };
}

const std::vector<LayerKind>& layer_kinds() {
  static const std::vector<LayerKind> kinds = [] {
    std::vector<LayerKind> all = named_layer_kinds();
    for (const catalog::Op& op : catalog::ops())
      if (op.section == "activation" && !op.is(TDM_OP_GRADIENT)) all.push_back({op.name, expand_activation});
    return all;
  }();
  return kinds;
}

// Layers that may read a rank's slice of an activation: those lowering to
// one elementwise op of the same name (the op table's flag: their output is
// then a slice too) and a row-parallel linear.
Result<ValueId> expand_on_slice(Context& ctx, const std::vector<ValueId>& inputs) {
  const std::string& op = ctx.layer->op;
  const bool elementwise = ops::is(op, ops::kElementwise);
  const bool row = op == "linear" && ctx.layer->string_attr("parallel", "none") == "row";
  if (inputs.size() != 1 || !(elementwise || row))
    return ctx.error("reads '" + ctx.value(inputs[0]).name +
                     "', of which each rank holds a slice (a column-parallel linear with gather_output = "
                     "false): only elementwise layers (the activations, dropout) or a row-parallel "
                     "linear may follow it");
  auto y = expand_layer_whole(ctx, inputs);
  if (y && elementwise) ctx.out.split_activations.insert(*y);
  return y;
}

}  // namespace

Result<ValueId> expand_layer(Context& ctx, const std::vector<ValueId>& inputs) {
  for (ValueId v : inputs)
    if (ctx.out.split_activations.count(v) > 0) return expand_on_slice(ctx, inputs);
  return expand_layer_whole(ctx, inputs);
}

Result<ValueId> expand_layer_whole(Context& ctx, const std::vector<ValueId>& inputs) {
  for (const LayerKind& kind : layer_kinds())
    if (kind.name == ctx.layer->op) return kind.expand(ctx, inputs);
  return ctx.error("has no expansion (internal: the layer schema and the builder disagree)");
}

}  // namespace tandem::host::lowering::detail
