// attention, attention_grad (sdk/ops.md): scaled dot-product attention over
// q [B,H,T,D], k [B,G,S,D], v [B,G,S,E] (or, with layout "bthd", q
// [B,T,H,D], k [B,S,G,D], v [B,S,G,E]) with G dividing H (grouped /
// multi-query heads), an optional u8 key-padding mask [B,S] and the
// dropout's s64 seed_offset; the forward saves the log-sum-exp [B,H,T] so
// the gradient recomputes probabilities instead of keeping T x S of them.
#include <tuple>

#include "ops/rules.hpp"
#include "tandem/attention_layout.hpp"

namespace tandem::host::ops {
namespace {

using namespace rules;

tdm_dtype stats_dtype(tdm_dtype data) {
  return data == TDM_F64 ? TDM_F64 : TDM_F32;
}

// The sizes of an attention op, whichever its layout (sdk/ops.md,
// attention's `layout`): "bhtd" keeps q [B,H,T,D], "bthd" q [B,T,H,D].
struct Geometry {
  int64_t B = 0, H = 0, G = 0, T = 0, S = 0, D = 0, E = 0;
  AttentionLayout layout;
  tdm_dtype dtype = TDM_F32;
  // A q-like tensor of `heads` heads, n positions and width w, in the layout.
  Dims shape(int64_t heads, int64_t n, int64_t w) const { return layout.dims(B, heads, n, w); }
};

// The operands every attention op shares: q, k, v at `first`, and the
// optional mask and seed_offset at `extras` and `extras + 1`.
Result<Geometry> check_operands(const ShapeQuery& q, size_t first, size_t extras) {
  auto qr = input(q, first, "q");
  auto kr = input(q, first + 1, "k");
  auto vr = input(q, first + 2, "v");
  if (!qr) return qr.error();
  if (!kr) return kr.error();
  if (!vr) return vr.error();
  Geometry g;
  const std::string layout = string_attr(q, "layout", "bhtd");
  if (!AttentionLayout::parse(layout, g.layout))
    return bad("attribute 'layout' is '" + layout + "'; it must be \"bhtd\" (q [B,H,T,D]) or \"bthd\" " +
               "(q [B,T,H,D])");
  const TensorType &qt = *qr, &kt = *kr, &vt = *vr;
  const char* expected = g.layout.tokens_first ? "[B,T,H,D], [B,S,G,D], [B,S,G,E] (layout \"bthd\")"
                                               : "[B,H,T,D], [B,G,S,D], [B,G,S,E]";
  if (qt.dims.size() != 4 || kt.dims.size() != 4 || vt.dims.size() != 4)
    return bad("q " + str(qt) + ", k " + str(kt) + " and v " + str(vt) + " must be " + expected);
  if (kt.dtype != qt.dtype || vt.dtype != qt.dtype) return bad("q, k and v must have one dtype");
  const size_t heads = size_t(g.layout.heads_axis()), positions = size_t(g.layout.positions_axis());
  g.dtype = qt.dtype;
  g.B = qt.dims[0], g.H = qt.dims[heads], g.T = qt.dims[positions], g.D = qt.dims[3];
  g.G = kt.dims[heads], g.S = kt.dims[positions], g.E = vt.dims[3];
  if (kt.dims != g.shape(g.G, g.S, g.D) || vt.dims != g.shape(g.G, g.S, g.E))
    return bad("k " + str(kt) + " and v " + str(vt) + " do not match q " + str(qt) + " (" + expected + ")");
  if (g.G < 1 || g.H % g.G != 0)
    return bad("the key/value heads (" + std::to_string(g.G) + ") must divide the query heads (" +
               std::to_string(g.H) + ")");
  if (present(q, extras) && (q.inputs[extras]->dtype != TDM_U8 || q.inputs[extras]->dims != Dims{g.B, g.S}))
    return bad("key_padding_mask " + str(*q.inputs[extras]) + " must be u8[" + std::to_string(g.B) + "," +
               std::to_string(g.S) + "]");
  if (present(q, extras + 1) &&
      (q.inputs[extras + 1]->dtype != TDM_S64 || !q.inputs[extras + 1]->dims.empty()))
    return bad("seed_offset " + str(*q.inputs[extras + 1]) + " must be an s64 scalar");
  return g;
}

Outputs attention_shape(const ShapeQuery& q) {
  auto g = check_operands(q, 0, 3);
  if (!g) return g.error();
  return std::vector<TensorType>{{g->dtype, g->shape(g->H, g->T, g->E)},
                                 {stats_dtype(g->dtype), {g->B, g->H, g->T}}};
}

Outputs attention_grad_shape(const ShapeQuery& q) {
  auto g = check_operands(q, 1, 6);
  if (!g) return g.error();
  const TensorType o{g->dtype, g->shape(g->H, g->T, g->E)}, lse{stats_dtype(g->dtype), {g->B, g->H, g->T}};
  for (auto [i, name, want] :
       {std::tuple{size_t(0), "do", o}, {size_t(4), "o", o}, {size_t(5), "lse", lse}}) {
    auto t = input(q, i, name);
    if (!t) return t.error();
    if (t->dtype != want.dtype || t->dims != want.dims)
      return bad(std::string(name) + " " + str(*t) + " must be " + str(want));
  }
  return std::vector<TensorType>{{g->dtype, g->shape(g->H, g->T, g->D)},
                                 {g->dtype, g->shape(g->G, g->S, g->D)},
                                 {g->dtype, g->shape(g->G, g->S, g->E)}};
}

// dq, dk, dv from one attention_grad node; the mask and seed_offset are
// passed on so the gradient replays the forward's masks.
Result<void> attention_grad(GradContext& g) {
  auto r = g.emit("attention_grad", "grad",
                  {g.dy(), g.in(0), g.in(1), g.in(2), g.out(0), g.out(1), g.in(3), g.in(4)}, g.node().attrs,
                  {g.type(g.in(0)), g.type(g.in(1)), g.type(g.in(2))});
  if (!r) return r.error();
  for (size_t i = 0; i < 3; ++i)
    if (auto a = g.accumulate(g.in(i), (*r)[i]); !a) return a;
  return {};
}

// Multiply-adds x 2 of q·kᵀ and p·v (causal: about half of them), with
// q, k, v at inputs first..first+2.
double product_flops(const Graph& g, const Node& n, size_t first) {
  const Dims& q = g.value(n.inputs[first])->type.dims;
  const Dims& k = g.value(n.inputs[first + 1])->type.dims;
  const Dims& v = g.value(n.inputs[first + 2])->type.dims;
  // B·H·T query rows (any layout) times S keys, at k's positions axis.
  AttentionLayout layout;
  AttentionLayout::parse(string_attr(n.attrs, "layout", "bhtd"), layout);
  const double pairs =
      double(q[0]) * double(q[1]) * double(q[2]) * double(k[size_t(layout.positions_axis())]);
  const double causal = int_attr(n.attrs, "causal", 0) != 0 ? 0.5 : 1.0;
  return 2.0 * pairs * double(q[3] + v[3]) * causal;
}
double attention_flops(const Graph& g, const Node& n) {
  return product_flops(g, n, 0);
}
// The gradient recomputes q·kᵀ and forms dp = do·vᵀ, dv, dq and dk.
double attention_grad_flops(const Graph& g, const Node& n) {
  return 2.5 * product_flops(g, n, 1);
}

}  // namespace

std::vector<OpInfo> attention_ops() {
  return {{.name = "attention", .shape = attention_shape, .grad = attention_grad, .flops = attention_flops},
          {.name = "attention_grad",
           .shape = attention_grad_shape,
           .no_grad = "a gradient op",
           .flops = attention_grad_flops}};
}

}  // namespace tandem::host::ops
