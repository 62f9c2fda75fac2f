// Reference backend — scaled dot-product attention and its gradient.
//
// For query row (b, h, t) and key s of kv head g = h / (H/G):
//   score_s = scale · q·k_s, over the keys s that are allowed (not padding,
//   and s ≤ t + S − T when causal);
//   lse = log Σ_s exp(score_s), p_s = exp(score_s − lse);
//   o = Σ_s d_s·p_s·v_s, with d_s = keep_s/(1 − dropout) the dropout of the
//   catalog's counter mask at flat index ((b·H + h)·T + t)·S + s.
// A row with no allowed key gives o = 0 and lse = −inf. The gradient
// recomputes p from lse (never storing T x S), with D_t = do·o:
//   dv_s += d_s·p_s·do,  ds = p_s·(d_s·(do·v_s) − D_t),
//   dq += scale·ds·k_s,  dk_s += scale·ds·q.
// Everything in double; each (b, h, t) row is independent. With layout
// "bthd" (heads after the positions) the tensors are permuted to heads
// first on load and back on store, so the sums are the same code.
#include <cmath>
#include <limits>

#include "common.hpp"
#include "tandem/attention_operands.hpp"
#include "tandem/dropout_mask.hpp"

namespace tandem::reference {
namespace {

struct Geometry : AttentionOperands {
  tdm_dtype dt = TDM_F32, stats = TDM_F32;

  int64_t group(int64_t h) const { return h / (H / G); }
  // x in the layout as [B, heads, n, w] (`to_heads`), or back.
  std::vector<double> permuted(std::vector<double> x, int64_t heads, int64_t n, int64_t w,
                               bool to_heads) const {
    if (!layout.tokens_first) return x;
    std::vector<double> y(x.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < n; ++t)
          for (int64_t i = 0; i < w; ++i) {
            const size_t first = size_t(AttentionLayout{}.row(b, h, t, heads, n, w) + i),
                         stored = size_t(layout.row(b, h, t, heads, n, w) + i);
            if (to_heads)
              y[first] = x[stored];
            else
              y[stored] = x[first];
          }
    return y;
  }
  std::vector<double> load_rows(const void* p, int64_t heads, int64_t n, int64_t w) const {
    return permuted(load<double>(p, dt, B * heads * n * w), heads, n, w, true);
  }
  void store_rows(void* p, const std::vector<double>& x, int64_t heads, int64_t n, int64_t w) const {
    store(p, dt, permuted(x, heads, n, w, false));
  }
  // Whether query t of batch b may attend key s.
  bool allowed(const uint8_t* mask, int64_t b, int64_t t, int64_t s) const {
    if (has_mask && mask[b * S + s] != 0) return false;
    return !causal || s <= t + S - T;
  }
  // The dropout factor d_s of element (b, h, t, s).
  double keep(uint64_t seed_now, int64_t b, int64_t h, int64_t t, int64_t s) const {
    if (dropout == 0) return 1;
    const uint64_t i = uint64_t(((b * H + h) * T + t) * S + s);
    return dropout_keep(seed_now, i, float(dropout)) ? 1 / (1 - dropout) : 0;
  }
};

// q, k, v at inputs first..first+2; the optional mask and seed_offset at
// `extras` and `extras + 1`.
Geometry check_operands(Check& c, size_t first, size_t extras) {
  Geometry g;
  g.dt = c.primary_dtype(first, kFloat);
  g.stats = g.dt == TDM_F64 ? TDM_F64 : TDM_F32;
  static_cast<AttentionOperands&>(g) = check_attention_operands(c, first, extras, g.dt);
  return g;
}

uint64_t seed_now(const Geometry& g, void* const* in) {
  return g.seed + (g.has_offset ? uint64_t(*static_cast<const int64_t*>(in[g.offset_slot])) : 0);
}

double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

std::unique_ptr<Kernel> attention(const OpView& view, size_t&) {
  Check c(view);
  const Geometry g = check_operands(c, 0, 3);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const auto q = g.load_rows(in[0], g.H, g.T, g.D);
    const auto k = g.load_rows(in[1], g.G, g.S, g.D);
    const auto v = g.load_rows(in[2], g.G, g.S, g.E);
    const auto* mask = static_cast<const uint8_t*>(g.has_mask ? in[g.mask_slot] : nullptr);
    const uint64_t seed = seed_now(g, in);
    std::vector<double> o(size_t(g.B * g.H * g.T * g.E), 0.0), lse(size_t(g.B * g.H * g.T));
    std::vector<double> score(size_t(g.S));
    for (int64_t b = 0; b < g.B; ++b)
      for (int64_t h = 0; h < g.H; ++h)
        for (int64_t t = 0; t < g.T; ++t) {
          const int64_t row = (b * g.H + h) * g.T + t, kv = b * g.G + g.group(h);
          double m = -std::numeric_limits<double>::infinity();
          for (int64_t s = 0; s < g.S; ++s) {
            score[size_t(s)] = g.allowed(mask, b, t, s) ? g.scale * dot(&q[size_t(row * g.D)],
                                                                        &k[size_t((kv * g.S + s) * g.D)], g.D)
                                                        : -std::numeric_limits<double>::infinity();
            m = std::max(m, score[size_t(s)]);
          }
          if (std::isinf(m)) {  // no key allowed: o stays 0
            lse[size_t(row)] = m;
            continue;
          }
          double sum = 0;
          for (int64_t s = 0; s < g.S; ++s) sum += std::exp(score[size_t(s)] - m);
          lse[size_t(row)] = m + std::log(sum);
          for (int64_t s = 0; s < g.S; ++s) {
            const double p = std::exp(score[size_t(s)] - lse[size_t(row)]) * g.keep(seed, b, h, t, s);
            if (p == 0) continue;
            for (int64_t e = 0; e < g.E; ++e)
              o[size_t(row * g.E + e)] += p * v[size_t((kv * g.S + s) * g.E + e)];
          }
        }
    g.store_rows(out[0], o, g.H, g.T, g.E);
    store(out[1], g.stats, lse);
  });
}

std::unique_ptr<Kernel> attention_grad(const OpView& view, size_t&) {
  Check c(view);
  const Geometry g = check_operands(c, 1, 6);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const auto dout = g.load_rows(in[0], g.H, g.T, g.E), q = g.load_rows(in[1], g.H, g.T, g.D);
    const auto k = g.load_rows(in[2], g.G, g.S, g.D), v = g.load_rows(in[3], g.G, g.S, g.E);
    const auto o = g.load_rows(in[4], g.H, g.T, g.E), lse = load<double>(in[5], g.stats, g.B * g.H * g.T);
    const auto* mask = static_cast<const uint8_t*>(g.has_mask ? in[g.mask_slot] : nullptr);
    const uint64_t seed = seed_now(g, in);
    std::vector<double> dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
    for (int64_t b = 0; b < g.B; ++b)
      for (int64_t h = 0; h < g.H; ++h)
        for (int64_t t = 0; t < g.T; ++t) {
          const int64_t row = (b * g.H + h) * g.T + t, kv = b * g.G + g.group(h);
          if (std::isinf(lse[size_t(row)])) continue;
          const double* qr = &q[size_t(row * g.D)];
          const double* dor = &dout[size_t(row * g.E)];
          const double rowsum = dot(dor, &o[size_t(row * g.E)], g.E);
          for (int64_t s = 0; s < g.S; ++s) {
            if (!g.allowed(mask, b, t, s)) continue;
            const size_t ks = size_t((kv * g.S + s) * g.D), vs = size_t((kv * g.S + s) * g.E);
            const double p = std::exp(g.scale * dot(qr, &k[ks], g.D) - lse[size_t(row)]);
            const double d = g.keep(seed, b, h, t, s);
            const double ds = p * (d * dot(dor, &v[vs], g.E) - rowsum);
            for (int64_t e = 0; e < g.E; ++e) dv[vs + size_t(e)] += d * p * dor[e];
            for (int64_t i = 0; i < g.D; ++i) {
              dq[size_t(row * g.D + i)] += g.scale * ds * k[ks + size_t(i)];
              dk[ks + size_t(i)] += g.scale * ds * qr[i];
            }
          }
        }
    g.store_rows(out[0], dq, g.H, g.T, g.D);
    g.store_rows(out[1], dk, g.G, g.S, g.D);
    g.store_rows(out[2], dv, g.G, g.S, g.E);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("attention", attention);
  r.add("attention_grad", attention_grad);
});

}  // namespace

}  // namespace tandem::reference
