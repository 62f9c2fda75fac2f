// Tandem SDK — the shape rules of the layers (tandem/op_shapes.hpp):
// attention, layer, batch and RMS normalization, rope, embedding, the
// softmax cross-entropy loss and dropout, with their gradients.
// Header-only, standard library only.
#ifndef TANDEM_OP_SHAPES_LAYERS_HPP
#define TANDEM_OP_SHAPES_LAYERS_HPP

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "tandem/attention_layout.hpp"
#include "tandem/op_shape_query.hpp"

namespace tandem::shapes {
namespace detail {

// The dtype of the statistics a layer saves and of the loss: f32 (f64 when
// the data is f64) whatever the data's dtype.
inline tdm_dtype layer_stats_dtype(tdm_dtype data) {
  return data == TDM_F64 ? TDM_F64 : TDM_F32;
}

// --- attention --------------------------------------------------------------

// q [B,H,T,D], k [B,G,S,D], v [B,G,S,E] (or, with layout "bthd", q
// [B,T,H,D], k [B,S,G,D], v [B,S,G,E]) with G dividing H, an optional u8
// key-padding mask [B,S] and the dropout's s64 seed_offset; the forward
// saves the log-sum-exp [B,H,T].

// The sizes of an attention op, whichever its layout (sdk/ops.md,
// attention's `layout`): "bhtd" keeps q [B,H,T,D], "bthd" q [B,T,H,D].
struct AttentionGeometry {
  int64_t B = 0, H = 0, G = 0, T = 0, S = 0, D = 0, E = 0;
  AttentionLayout layout;
  tdm_dtype dtype = TDM_F32;
  // A q-like tensor of `heads` heads, n positions and width w, in the layout.
  Dims shape(int64_t heads, int64_t n, int64_t w) const { return layout.dims(B, heads, n, w); }
};

// The operands every attention op shares: q, k, v at `first`, and the
// optional mask and seed_offset at `extras` and `extras + 1`.
inline AttentionGeometry attention_operands(const Query& q, size_t first, size_t extras) {
  const TensorShape& qt = q.input(first, "q");
  const TensorShape& kt = q.input(first + 1, "k");
  const TensorShape& vt = q.input(first + 2, "v");
  AttentionGeometry g;
  const std::string layout = q.string_attr("layout");
  if (!AttentionLayout::parse(layout, g.layout))
    fail("attribute 'layout' is '" + layout + "'; it must be \"bhtd\" (q [B,H,T,D]) or \"bthd\" " +
         "(q [B,T,H,D])");
  const char* expected = g.layout.tokens_first ? "[B,T,H,D], [B,S,G,D], [B,S,G,E] (layout \"bthd\")"
                                               : "[B,H,T,D], [B,G,S,D], [B,G,S,E]";
  if (qt.dims.size() != 4 || kt.dims.size() != 4 || vt.dims.size() != 4)
    fail("q " + str(qt) + ", k " + str(kt) + " and v " + str(vt) + " must be " + expected);
  if (kt.dtype != qt.dtype || vt.dtype != qt.dtype) fail("q, k and v must have one dtype");
  const size_t heads = size_t(g.layout.heads_axis()), positions = size_t(g.layout.positions_axis());
  g.dtype = qt.dtype;
  g.B = qt.dims[0], g.H = qt.dims[heads], g.T = qt.dims[positions], g.D = qt.dims[3];
  g.G = kt.dims[heads], g.S = kt.dims[positions], g.E = vt.dims[3];
  if (kt.dims != g.shape(g.G, g.S, g.D) || vt.dims != g.shape(g.G, g.S, g.E))
    fail("k " + str(kt) + " and v " + str(vt) + " do not match q " + str(qt) + " (" + expected + ")");
  if (g.G < 1 || g.H % g.G != 0)
    fail("the key/value heads (" + std::to_string(g.G) + ") must divide the query heads (" +
         std::to_string(g.H) + ")");
  const TensorShape* mask = q.optional(extras);
  if (mask != nullptr && (mask->dtype != TDM_U8 || mask->dims != Dims{g.B, g.S}))
    fail("key_padding_mask " + str(*mask) + " must be u8[" + std::to_string(g.B) + "," + std::to_string(g.S) +
         "]");
  const TensorShape* seed = q.optional(extras + 1);
  if (seed != nullptr && (seed->dtype != TDM_S64 || !seed->dims.empty()))
    fail("seed_offset " + str(*seed) + " must be an s64 scalar");
  return g;
}

inline Outputs attention_shape(const Query& q) {
  const AttentionGeometry g = attention_operands(q, 0, 3);
  return Outputs{{g.dtype, g.shape(g.H, g.T, g.E)}, {layer_stats_dtype(g.dtype), {g.B, g.H, g.T}}};
}

inline Outputs attention_grad_shape(const Query& q) {
  const AttentionGeometry g = attention_operands(q, 1, 6);
  const TensorShape o{g.dtype, g.shape(g.H, g.T, g.E)}, lse{layer_stats_dtype(g.dtype), {g.B, g.H, g.T}};
  require(q.input(0, "do"), o, "do");
  require(q.input(4, "o"), o, "o");
  require(q.input(5, "lse"), lse, "lse");
  return Outputs{{g.dtype, g.shape(g.H, g.T, g.D)},
                 {g.dtype, g.shape(g.G, g.S, g.D)},
                 {g.dtype, g.shape(g.G, g.S, g.E)}};
}

// --- normalization ----------------------------------------------------------

// Over the last dim D; mean and rstd are f32 [...] (f64 in f64).
inline Outputs layer_norm_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const TensorShape& gamma = q.input(1, "gamma");
  const TensorShape& beta = q.input(2, "beta");
  if (x.dims.empty()) fail("x must have rank >= 1");
  const Dims d = {x.dims.back()};
  if (gamma.dims != d || beta.dims != d)
    fail("gamma " + str(gamma) + " and beta " + str(beta) + " must be [" + std::to_string(d[0]) + "]");
  const TensorShape stats{layer_stats_dtype(x.dtype), Dims(x.dims.begin(), x.dims.end() - 1)};
  return Outputs{x, stats, stats};
}

// A gradient's view of its forward over the last dim: dy and x [..., D],
// gamma [D], and the saved statistics `stats` (slots first.., names) of
// f32 [...] (f64 in f64).
inline void norm_grad_operands(const Query& q, std::initializer_list<std::pair<size_t, const char*>> stats) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& x = q.input(1, "x");
  const TensorShape& gamma = q.input(2, "gamma");
  if (dy.dims != x.dims) fail("dy " + str(dy) + " and x " + str(x) + " must have one shape");
  if (x.dims.empty()) fail("x must have rank >= 1");
  require(gamma, {x.dtype, {x.dims.back()}}, "gamma");
  const TensorShape saved{layer_stats_dtype(x.dtype), Dims(x.dims.begin(), x.dims.end() - 1)};
  for (auto [slot, name] : stats) require(q.input(slot, name), saved, name);
}

inline Outputs layer_norm_grad_shape(const Query& q) {
  norm_grad_operands(q, {{3, "mean"}, {4, "rstd"}});
  const TensorShape& x = q.input(1, "x");
  addend_like(q, 5, x);
  return Outputs{x, q.input(2, "gamma"), q.input(2, "gamma")};
}

// Per channel (dim 1) of x [N, C, ...] in slot x_slot: x, after checking
// the [C] tensors in slots first..last.
inline const TensorShape& batch_norm_operands(const Query& q, size_t first, size_t last, size_t x_slot = 0) {
  const TensorShape& x = q.input(x_slot, "x");
  if (x.dims.size() < 2) fail("x " + str(x) + " must be [N, C, ...]");
  const Dims c = {x.dims[1]};
  for (size_t i = first; i <= last; ++i) {
    const TensorShape& t = q.input(i, "per-channel tensor");
    if (t.dims != c)
      fail("input " + std::to_string(i) + " " + str(t) + " must be [" + std::to_string(c[0]) + "]");
  }
  return x;
}

// Training updates the running statistics in place (out 3 = in 3, out 4 =
// in 4).
inline Outputs batch_norm_train_shape(const Query& q) {
  const TensorShape& x = batch_norm_operands(q, 1, 4);
  if (x.dims[1] != 0 && numel(x.dims) / x.dims[1] < 2)
    fail("training needs at least 2 values per channel, x is " + str(x));
  const TensorShape c{x.dtype, {x.dims[1]}};
  return Outputs{x, c, c, c, c};
}

inline Outputs batch_norm_inference_shape(const Query& q) {
  return Outputs{batch_norm_operands(q, 1, 4)};
}

inline Outputs batch_norm_grad_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& x = q.input(1, "x");
  if (dy.dims != x.dims) fail("dy " + str(dy) + " and x " + str(x) + " must have one shape");
  batch_norm_operands(q, 2, 4, 1);
  const TensorShape& gamma = q.input(2, "gamma");
  return Outputs{x, gamma, gamma};
}

// Over the last dim D, without centring; rstd is f32 [...] (f64 in f64).
inline Outputs rms_norm_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const TensorShape& gamma = q.input(1, "gamma");
  if (x.dims.empty()) fail("x must have rank >= 1");
  if (gamma.dims != Dims{x.dims.back()} || gamma.dtype != x.dtype)
    fail("gamma " + str(gamma) + " must be " + str(TensorShape{x.dtype, {x.dims.back()}}));
  const TensorShape rstd{layer_stats_dtype(x.dtype), Dims(x.dims.begin(), x.dims.end() - 1)};
  return Outputs{x, rstd};
}

inline Outputs rms_norm_grad_shape(const Query& q) {
  norm_grad_operands(q, {{3, "rstd"}});
  const TensorShape& x = q.input(1, "x");
  addend_like(q, 4, x);
  return Outputs{x, q.input(2, "gamma")};
}

// --- rope, embedding --------------------------------------------------------

// rope and rope_grad: over the last two dims [..., T, D] of x (D even),
// positions offset by an optional s64 scalar; llama3 scaling blends
// between its two wavelength bounds, so they must be ordered.
inline Outputs rope_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  if (x.dims.size() < 2) fail("x " + str(x) + " must be [..., T, D]");
  if (x.dims.back() % 2 != 0) fail("x " + str(x) + ": the last dim D must be even");
  const TensorShape* offset = q.optional(1);
  if (offset != nullptr && (offset->dtype != TDM_S64 || !offset->dims.empty()))
    fail("position_offset " + str(*offset) + " must be an s64 scalar");
  if (q.string_attr("scaling") == "llama3" &&
      !(q.float_attr("high_freq_factor") > q.float_attr("low_freq_factor")))
    fail("scaling llama3 needs high_freq_factor above low_freq_factor");
  return Outputs{x};
}

// padding_idx, -1 or a row of the table's V.
inline void padding_row(const Query& q, int64_t V) {
  const int64_t p = q.int_attr("padding_idx");
  if (p >= V)
    fail("padding_idx " + std::to_string(p) + " is not a row of a table with " + std::to_string(V) + " rows");
}

// table [V, D], s32 indices [...], y [..., D].
inline Outputs embedding_shape(const Query& q) {
  const TensorShape& table = q.input(0, "table");
  const TensorShape& indices = q.input(1, "indices");
  if (table.dims.size() != 2) fail("table " + str(table) + " must be [V, D]");
  if (indices.dtype != TDM_S32) fail("indices " + str(indices) + " must be s32");
  padding_row(q, table.dims[0]);
  Dims y = indices.dims;
  y.push_back(table.dims[1]);
  return Outputs{{table.dtype, y}};
}

// The gradient's V comes from its declared output.
inline Outputs embedding_grad_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& indices = q.input(1, "indices");
  const TensorShape& dtable = q.declared(0, "vocabulary size V");
  Dims expected = indices.dims;
  expected.push_back(dtable.dims.size() == 2 ? dtable.dims[1] : -1);
  if (dtable.dims.size() != 2 || dy.dims != expected)
    fail("dy " + str(dy) + " must be [..indices.., D] for dtable " + str(dtable));
  padding_row(q, dtable.dims[0]);
  return Outputs{{dy.dtype, dtable.dims}};
}

// --- loss, dropout ----------------------------------------------------------

// logits [N, C], s32 labels [N].
inline void loss_operands(const TensorShape& logits, const TensorShape& labels) {
  if (logits.dims.size() != 2) fail("logits " + str(logits) + " must be [N, C]");
  if (labels.dtype != TDM_S32 || labels.dims != Dims{logits.dims[0]})
    fail("labels " + str(labels) + " must be s32[" + std::to_string(logits.dims[0]) + "]");
}

// A scalar loss, f64 when the op runs in f64.
inline Outputs softmax_cross_entropy_shape(const Query& q) {
  const TensorShape& logits = q.input(0, "logits");
  const TensorShape& labels = q.input(1, "labels");
  loss_operands(logits, labels);
  return Outputs{{layer_stats_dtype(logits.dtype), {}}};
}

inline Outputs softmax_cross_entropy_grad_shape(const Query& q) {
  const TensorShape& dloss = q.input(0, "dloss");
  const TensorShape& logits = q.input(1, "logits");
  const TensorShape& labels = q.input(2, "labels");
  if (!dloss.dims.empty()) fail("dloss " + str(dloss) + " must be a scalar");
  loss_operands(logits, labels);
  return Outputs{logits};
}

// The count of rows predicted right.
inline Outputs count_correct_shape(const Query& q) {
  const TensorShape& logits = q.input(0, "logits");
  const TensorShape& labels = q.input(1, "labels");
  loss_operands(logits, labels);
  return Outputs{{TDM_F32, {}}};
}

// y and a u8 mask of x's shape.
inline Outputs dropout_shape(const Query& q) {
  const TensorShape& x = q.input(0, "x");
  const TensorShape* seed = q.optional(1);
  if (seed != nullptr && (seed->dtype != TDM_S64 || !seed->dims.empty()))
    fail("seed_offset " + str(*seed) + " must be an s64 scalar");
  return Outputs{x, {TDM_U8, x.dims}};
}

inline Outputs dropout_grad_shape(const Query& q) {
  const TensorShape& dy = q.input(0, "dy");
  const TensorShape& mask = q.input(1, "mask");
  if (mask.dtype != TDM_U8 || mask.dims != dy.dims)
    fail("mask " + str(mask) + " must be u8 with dy's shape " + dims_str(dy.dims));
  return Outputs{dy};
}

}  // namespace detail

inline constexpr RuleEntry kLayerRules[] = {
    {"attention", detail::attention_shape},
    {"attention_grad", detail::attention_grad_shape},
    {"layer_norm", detail::layer_norm_shape},
    {"layer_norm_grad", detail::layer_norm_grad_shape},
    {"batch_norm_train", detail::batch_norm_train_shape},
    {"batch_norm_inference", detail::batch_norm_inference_shape},
    {"batch_norm_grad", detail::batch_norm_grad_shape},
    {"rms_norm", detail::rms_norm_shape},
    {"rms_norm_grad", detail::rms_norm_grad_shape},
    {"rope", detail::rope_shape},
    {"rope_grad", detail::rope_shape},
    {"embedding", detail::embedding_shape},
    {"embedding_grad", detail::embedding_grad_shape},
    {"softmax_cross_entropy", detail::softmax_cross_entropy_shape},
    {"softmax_cross_entropy_grad", detail::softmax_cross_entropy_grad_shape},
    {"count_correct", detail::count_correct_shape},
    {"dropout", detail::dropout_shape},
    {"dropout_grad", detail::dropout_grad_shape},
};

}  // namespace tandem::shapes

#endif  // TANDEM_OP_SHAPES_LAYERS_HPP
