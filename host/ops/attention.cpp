// attention, attention_grad (sdk/ops.md): scaled dot-product attention over
// q [B,H,T,D], k [B,G,S,D], v [B,G,S,E] (or, with layout "bthd", q
// [B,T,H,D], k [B,S,G,D], v [B,S,G,E]) with G dividing H (grouped /
// multi-query heads), an optional u8 key-padding mask [B,S] and the
// dropout's s64 seed_offset; the forward saves the log-sum-exp [B,H,T] so
// the gradient recomputes probabilities instead of keeping T x S of them.
#include "ops/rules.hpp"
#include "tandem/attention_layout.hpp"

namespace tandem::host::ops {
namespace {

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
  return {{.name = "attention", .grad = attention_grad, .flops = attention_flops},
          {.name = "attention_grad", .no_grad = "a gradient op", .flops = attention_grad_flops}};
}

}  // namespace tandem::host::ops
