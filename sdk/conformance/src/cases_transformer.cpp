// Cases: the transformer ops of SDK 1.5 — rms_norm, rope, attention.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tandem/attention_layout.hpp"
#include "tandem/conformance/cases.hpp"
#include "tandem/dropout_mask.hpp"

namespace tandem::conformance {

namespace {

using Dims = std::vector<int64_t>;

// rstd (input 3 of rms_norm_grad) that matches x (input 1), epsilon 1e-6.
void rms_stats(const Case&, std::vector<HostTensor>& in) {
  const int64_t d = in[1].dims().back(), rows = in[1].numel() / d;
  for (int64_t r = 0; r < rows; ++r) {
    double sq = 0;
    for (int64_t i = 0; i < d; ++i) sq += std::pow(in[1].get(r * d + i), 2);
    in[3].set(r, 1.0 / std::sqrt(sq / double(d) + 1e-6));
  }
}

void add_rms_norm(std::vector<Case>& v) {
  const Dims shapes[] = {{1, 1}, {4, 16}, {2, 3, 7}, {5, 768}};
  for (tdm_dtype dt : kF32Bf16)
    for (const Dims& s : shapes) {
      const int64_t d = s.back();
      const Dims rows(s.begin(), s.end() - 1);
      int64_t n_rows = 1;
      for (int64_t r : rows) n_rows *= r;
      for (double eps : {1e-6, 1e-3}) {
        Case c("rms_norm", dt);
        if (eps != 1e-6) c.attrs.number("epsilon", eps);
        c.in(dt, s).in(dt, {d}, Fill::range(0.5, 1.5));
        v.push_back(c.out(dt, s).out(TDM_F32, rows).acc(d));
      }
      Case g("rms_norm_grad", dt);
      g.in(dt, s).in(dt, s).in(dt, {d}, Fill::range(0.5, 1.5)).in(TDM_F32, rows);
      g.fixup = rms_stats;
      v.push_back(g.out(dt, s).out(dt, {d}).acc(std::max(n_rows, d)));
      // With an addend (ABI 1.9): in its own buffer, and dx over it.
      for (int in_place = 0; in_place < 2; ++in_place) {
        Case ga("rms_norm_grad", dt);
        ga.in(dt, s).in(dt, s).in(dt, {d}, Fill::range(0.5, 1.5)).in(TDM_F32, rows).in(dt, s);
        ga.fixup = rms_stats;
        ga.out(dt, s).out(dt, {d}).acc(std::max(n_rows, d) + 1);
        v.push_back(in_place ? ga.alias(0, 4) : ga);
      }
    }
}

void add_rope(std::vector<Case>& v) {
  const Dims shapes[] = {{1, 2}, {3, 8}, {2, 4, 5, 16}, {1, 2, 33, 64}};
  for (tdm_dtype dt : kF32Bf16F16)
    for (const Dims& s : shapes)
      for (const char* op : {"rope", "rope_grad"}) {
        Case plain(op, dt);
        v.push_back(plain.in(dt, s).none().out(dt, s));
        // Positions far along a long context, and a smaller base.
        Case shifted(op, dt);
        shifted.attrs.number("base", 500);
        v.push_back(shifted.in(dt, s).in(TDM_S64, {}, Fill::ints(0, 2048)).out(dt, s));
        // Llama 3.1's scaling (ABI 1.14) with a short original context, so
        // that the pairs of one head fall in all three of its bands.
        if (s.back() < 16) continue;
        Case scaled(op, dt);
        scaled.attrs.number("base", 500).string("scaling", "llama3").number("factor", 8);
        scaled.attrs.number("low_freq_factor", 1)
            .number("high_freq_factor", 4)
            .integer("original_context", 64);
        v.push_back(scaled.in(dt, s).in(TDM_S64, {}, Fill::ints(0, 2048)).out(dt, s));
      }
}

struct Shape {
  int64_t B, H, G, T, S, D, E;
};

// The forward of attention in double, to give attention_grad's inputs o (4)
// and lse (5) that match q, k, v (1-3), the mask (6) and seed_offset (7).
void attention_forward(const Case& c, std::vector<HostTensor>& in) {
  const Dims& q = in[1].dims();
  const Dims& k = in[2].dims();
  AttentionLayout layout;
  AttentionLayout::parse(c.attrs.string_or("layout", "bhtd"), layout);
  const size_t heads = size_t(layout.heads_axis()), positions = size_t(layout.positions_axis());
  const int64_t B = q[0], H = q[heads], T = q[positions], D = q[3], G = k[heads], S = k[positions],
                E = in[3].dims()[3];
  // Where element i of the row of position `pos` of head `head` lives.
  auto at = [&](int64_t b, int64_t head, int64_t pos, int64_t n_heads, int64_t n, int64_t w, int64_t i) {
    return layout.row(b, head, pos, n_heads, n, w) + i;
  };
  const bool causal = c.attrs.number_or("causal", 0) != 0;
  const double p = c.attrs.number_or("dropout", 0);
  double scale = c.attrs.number_or("scale", 0);
  if (scale == 0) scale = 1 / std::sqrt(double(D));
  const uint64_t seed = uint64_t(int64_t(c.attrs.number_or("seed", 0))) +
                        (in[7].present() ? uint64_t(int64_t(in[7].get(0))) : 0);
  std::vector<double> score(static_cast<size_t>(S));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = (b * H + h) * T + t, kvh = h / (H / G);
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t s = 0; s < S; ++s) {
          const bool masked = (in[6].present() && in[6].get(b * S + s) != 0) || (causal && s > t + S - T);
          double dot = 0;
          for (int64_t i = 0; i < D; ++i)
            dot += in[1].get(at(b, h, t, H, T, D, i)) * in[2].get(at(b, kvh, s, G, S, D, i));
          score[size_t(s)] = masked ? -std::numeric_limits<double>::infinity() : scale * dot;
          m = std::max(m, score[size_t(s)]);
        }
        double sum = 0;
        for (int64_t s = 0; s < S && !std::isinf(m); ++s) sum += std::exp(score[size_t(s)] - m);
        const double lse = std::isinf(m) ? m : m + std::log(sum);
        in[5].set(row, lse);
        for (int64_t e = 0; e < E; ++e) {
          double o = 0;
          for (int64_t s = 0; s < S && !std::isinf(m); ++s) {
            const uint64_t flat = uint64_t(row * S + s);
            const double keep = p == 0 ? 1 : dropout_keep(seed, flat, float(p)) ? 1 / (1 - p) : 0;
            o += std::exp(score[size_t(s)] - lse) * keep * in[3].get(at(b, kvh, s, G, S, E, e));
          }
          in[4].set(at(b, h, t, H, T, E, e), o);
        }
      }
}

void add_attention(std::vector<Case>& v) {
  const Shape shapes[] = {
      {1, 1, 1, 1, 1, 1, 1},       {2, 3, 3, 5, 5, 8, 8},     {2, 4, 2, 7, 7, 16, 16},
      {1, 4, 1, 9, 9, 8, 8},       {2, 2, 2, 3, 11, 8, 6},    {1, 2, 1, 70, 70, 32, 32},
      {1, 1, 1, 130, 130, 64, 64}, {2, 4, 2, 33, 97, 32, 48},  // T < S, D ≠ E: the tensor-core kernels'
                                                               // partial tiles
  };
  struct Variant {
    int causal;
    bool mask;
    double dropout, scale;
    bool tokens_first;
  };
  // Layout "bthd" (since SDK 1.9): heads after the positions, with and
  // without the mask and dropout.
  const Variant variants[] = {{0, false, 0, 0, false},  {1, false, 0, 0, false}, {1, true, 0, 0.3, false},
                              {0, true, 0.2, 0, false}, {1, false, 0, 0, true},  {0, true, 0.2, 0.3, true}};
  for (tdm_dtype dt : kF32Bf16F16)
    for (const Shape& s : shapes)
      for (const Variant& w : variants) {
        Attrs a;
        if (w.causal) a.integer("causal", 1);
        if (w.scale != 0) a.number("scale", w.scale);
        if (w.dropout != 0) a.number("dropout", w.dropout).integer("seed", 977 * s.T + s.S);
        if (w.tokens_first) a.string("layout", "bthd");
        // A q-like tensor of n_heads heads, n positions and width d, in the layout.
        auto shape = [&](int64_t n_heads, int64_t n, int64_t d) {
          return AttentionLayout{w.tokens_first}.dims(s.B, n_heads, n, d);
        };
        const Dims q = shape(s.H, s.T, s.D), k = shape(s.G, s.S, s.D), val = shape(s.G, s.S, s.E);
        const Dims o = shape(s.H, s.T, s.E), lse{s.B, s.H, s.T};
        auto qkv = [&](Case& c) -> Case& {
          return c.in(dt, q, Fill::range(-2, 2)).in(dt, k, Fill::range(-2, 2)).in(dt, val);
        };
        auto mask_and_offset = [&](Case& c) -> Case& {
          w.mask ? c.in(TDM_U8, {s.B, s.S}, Fill::ints(0, 1)) : c.none();
          return w.dropout != 0 ? c.in(TDM_S64, {}, Fill::ints(0, 1 << 20)) : c.none();
        };
        Case f("attention", dt);
        f.attrs = a;
        mask_and_offset(qkv(f));
        v.push_back(f.out(dt, o).out(TDM_F32, lse).acc(s.S * std::max(s.D, s.E)));
        Case g("attention_grad", dt);  // do, q, k, v, o, lse, mask, seed_offset
        g.attrs = a;
        mask_and_offset(qkv(g.in(dt, o)).in(dt, o).in(TDM_F32, lse));
        g.fixup = attention_forward;
        v.push_back(g.out(dt, q).out(dt, k).out(dt, val).acc(s.S * std::max(s.D, s.E) * (s.H / s.G)));
      }
}

}  // namespace

void add_transformer_cases(std::vector<Case>& v) {
  add_rms_norm(v);
  add_rope(v);
  add_attention(v);
}

}  // namespace tandem::conformance
