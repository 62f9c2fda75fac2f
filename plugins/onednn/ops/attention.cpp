// oneDNN backend — fused attention and its gradient (sdk/ops.md,
// attention): own code over 64 x 64 tiles, flash-attention style, so no
// thread holds more than one tile of the T x S scores.
//
// Forward, one task per (batch, head, tile of 64 queries): for each tile of
// keys up to the causal limit, scores = (q·scale)·kᵀ, padded keys −inf and
// each causal row cut at its last visible key (on a tile across the
// diagonal, the products skip the hidden triangle: tiles::Causal); the
// running row maximum m and sum l rescale the accumulated p·v (online
// softmax); at the end o = acc / l and lse = m + log l. Dropout multiplies
// p by the catalog's counter mask after l has counted it.
// Backward, two passes that each own what they write: (1) per (batch, head,
// query tile) Δ = rowsum(do·o) into the workspace, and dq from every key
// tile; (2) per (batch, kv head, key tile) dk and dv from every query tile of
// every head of the group. Scores and probabilities are recomputed from lse.
// f32 arithmetic for f32 and bf16 data (bf16 tiles are widened on load).
// Layout "bthd" (heads after the positions) changes only where a head's
// rows live: a tile of consecutive positions of one head is a strided
// matrix (leading dimension heads x width), which the tile products read
// in place like a "bhtd" one (leading dimension the width).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <omp.h>

#include "attention_tiles.hpp"
#include "common.hpp"
#include "tandem/attention_operands.hpp"
#include "vector_loops.hpp"

namespace tandem::onednn {

namespace {

constexpr int64_t kTile = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Geometry {
  int64_t B = 0, H = 0, G = 0, T = 0, S = 0, D = 0, E = 0;
  bool causal = false, has_mask = false, has_offset = false;
  AttentionLayout layout;
  float scale = 0, dropout = 0;
  uint64_t seed = 0;
  size_t mask_slot = 0, offset_slot = 0;

  // The rows of q and o (and do, dq) of query head h, and of k and v (dk,
  // dv) of kv head kvh, from position 0, and their strides.
  int64_t q_row(int64_t b, int64_t h, int64_t t = 0) const { return layout.row(b, h, t, H, T, D); }
  int64_t o_row(int64_t b, int64_t h, int64_t t = 0) const { return layout.row(b, h, t, H, T, E); }
  int64_t k_row(int64_t b, int64_t kvh, int64_t s = 0) const { return layout.row(b, kvh, s, G, S, D); }
  int64_t v_row(int64_t b, int64_t kvh, int64_t s = 0) const { return layout.row(b, kvh, s, G, S, E); }
  int64_t ldq() const { return layout.stride(H, D); }
  int64_t ldo() const { return layout.stride(H, E); }
  int64_t ldk() const { return layout.stride(G, D); }
  int64_t ldv() const { return layout.stride(G, E); }
  // The kv head query head h reads.
  int64_t kv_head(int64_t h) const { return h / (H / G); }

  int64_t tiles(int64_t n) const { return (n + kTile - 1) / kTile; }
  // One past the last key any query of [t0, t1) may attend.
  int64_t key_end(int64_t t1) const { return causal ? std::clamp<int64_t>(t1 + S - T, 0, S) : S; }
  // How many of the bk keys from s0 query t may attend: causal rows stop at
  // key t + S - T, so on a tile across the diagonal the rest of a row is
  // never computed, only zeroed.
  int64_t visible(int64_t t, int64_t s0, int64_t bk) const {
    return causal ? std::clamp<int64_t>(t + S - T + 1 - s0, 0, bk) : bk;
  }
  // What the row loops of a tile take: query t0 + i sees the first
  // clamp(i + seen0, 0, bk) keys of the tile from s0 (visible, for every row).
  int64_t seen0(int64_t t0, int64_t s0, int64_t bk) const { return causal ? t0 + S - T + 1 - s0 : bk; }
  // The first query that may attend key s.
  int64_t query_begin(int64_t s) const { return causal ? std::clamp<int64_t>(s - (S - T), 0, T) : 0; }
  // What a tile product of query tile t0 and key tile s0 may skip
  // (attention_tiles.hpp): query t0 + i sees key s0 + j when j <= i + shift.
  tiles::Causal triangle(int64_t t0, int64_t s0, tiles::Triangle kind) const {
    return causal ? tiles::Causal{kind, t0 + S - T - s0} : tiles::Causal{};
  }
};

Geometry check_operands(Check& c, size_t first, size_t extras, tdm_dtype& dt) {
  dt = c.primary_dtype(first, kF32Bf16);
  const AttentionOperands a = check_attention_operands(c, first, extras, dt);
  Geometry g;
  g.B = a.B, g.H = a.H, g.G = a.G, g.T = a.T, g.S = a.S, g.D = a.D, g.E = a.E;
  g.causal = a.causal, g.has_mask = a.has_mask, g.has_offset = a.has_offset;
  g.layout = a.layout;
  // f32 as the kernels compute, and as the catalog's mask rounds the dropout.
  g.scale = float(a.scale), g.dropout = float(a.dropout);
  g.seed = a.seed;
  g.mask_slot = a.mask_slot, g.offset_slot = a.offset_slot;
  return g;
}

// What one launch reads besides q, k, v.
struct LaunchState {
  const uint8_t* mask = nullptr;
  uint64_t seed = 0;
};

LaunchState launch_state(const Geometry& g, void* const* in) {
  LaunchState s;
  if (g.has_mask) s.mask = static_cast<const uint8_t*>(in[g.mask_slot]);
  s.seed = g.seed + (g.has_offset ? uint64_t(*static_cast<const int64_t*>(in[g.offset_slot])) : 0);
  return s;
}

// rows x cols from row r0 of a head's rows (`ld` apart), widened to f32
// into a dense tile.
template <class T>
void load_tile(const T* src, int64_t ld_src, int64_t r0, int64_t rows, int64_t cols, float* dst,
               float mul = 1.f) {
  if constexpr (std::is_same_v<T, float>) {
    loops::scale_rows(src + r0 * ld_src, ld_src, rows, cols, mul, dst, cols);
  } else {
    for (int64_t r = 0; r < rows; ++r)
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = ld(src, (r0 + r) * ld_src + c) * mul;
  }
}

// rows x cols of a dense f32 tile, times mul, into rows `ld` apart.
template <class T>
void store_tile(const float* src, int64_t rows, int64_t cols, T* dst, int64_t ld_dst, float mul = 1.f) {
  if constexpr (std::is_same_v<T, float>) {
    loops::scale_rows(src, cols, rows, cols, mul, dst, ld_dst);
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) st(dst, r * ld_dst + c, src[r * cols + c] * mul);
  }
}

// An f32 operand of the tile products: rows `ld` floats apart.
struct Rows {
  const float* p;
  int64_t ld;
};

// The rows of such a tile as f32 operands of the tile products: f32 rows
// where they are, `ld_src` apart in either layout (the products and the
// transposes take a leading dimension), bf16 rows widened into `stage`.
// Gathering layout "bthd"'s f32 rows into a dense tile first cost more than
// it saved: without it the GPT benchmark's attention took 46.3 against 48.8
// ms a step and its gradient 70.1 against 74.8 (1 thread, four alternating
// profiled runs each).
template <class T>
Rows tile_rows(const T* src, int64_t ld_src, int64_t r0, int64_t rows, int64_t cols, float* stage) {
  if constexpr (std::is_same_v<T, float>) return {src + r0 * ld_src, ld_src};
  load_tile(src, ld_src, r0, rows, cols, stage);
  return {stage, cols};
}

// Thread-private tile buffers, kept between launches (no allocation once warm).
float* scratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

// The scores of query rows [t0, t0+bq) against keys [s0, s0+bk) for
// (b, h): sc = qs·ktᵀ with padded keys −inf; qs is pre-scaled. Entries a
// causal row cannot see may be left unwritten: the row loops read only the
// first g.visible(...) of each row.
void scores(const Geometry& g, const LaunchState& ls, int64_t b, int64_t t0, int64_t bq, int64_t s0,
            int64_t bk, const float* qs, const float* kt, float* sc) {
  tiles::gemm(bq, bk, g.D, qs, g.D, kt, bk, sc, bk, false, g.triangle(t0, s0, tiles::Triangle::output));
  if (ls.mask != nullptr) {
    const uint8_t* padded = ls.mask + b * g.S + s0;
    for (int64_t j = 0; j < bk; ++j)
      if (padded[j] != 0)
        for (int64_t i = 0; i < bq; ++i) sc[i * bk + j] = kNegInf;
  }
}

// d of the catalog for keys [s0, s0 + n) of query t of (b, h): a row's mask
// elements are consecutive (loops::dropout_factors).
void dropout_factors(const Geometry& g, const LaunchState& ls, int64_t b, int64_t h, int64_t t, int64_t s0,
                     int64_t n, float* d) {
  loops::dropout_factors(ls.seed, uint64_t(((b * g.H + h) * g.T + t) * g.S + s0), g.dropout, n, d);
}

// The forward of one (b, h, query tile).
template <class T>
void forward_tile(const Geometry& g, const LaunchState& ls, void* const* in, void* const* out, int64_t b,
                  int64_t h, int64_t t0) {
  const int64_t bq = std::min(kTile, g.T - t0), kvh = g.kv_head(h);
  const int64_t wide = std::max(g.D, g.E);
  float* qs = scratch(size_t(kTile * (2 * g.D + wide + kTile + g.E + 2)));
  float *kt = qs + kTile * g.D, *stage = kt + kTile * g.D, *sc = stage + kTile * wide;
  float *acc = sc + kTile * kTile, *m = acc + kTile * g.E, *l = m + kTile;
  const T* q = static_cast<const T*>(in[0]);
  const T* k = static_cast<const T*>(in[1]);
  const T* v = static_cast<const T*>(in[2]);
  load_tile(q + g.q_row(b, h), g.ldq(), t0, bq, g.D, qs, g.scale);
  std::fill(m, m + bq, kNegInf);
  std::fill(l, l + bq, 0.f);
  std::fill(acc, acc + bq * g.E, 0.f);
  const int64_t end = g.key_end(t0 + bq);
  for (int64_t s0 = 0; s0 < end; s0 += kTile) {
    const int64_t bk = std::min(kTile, end - s0);
    const Rows keys = tile_rows(k + g.k_row(b, kvh), g.ldk(), s0, bk, g.D, stage);
    tiles::transpose(bk, g.D, keys.p, keys.ld, kt);
    scores(g, ls, b, t0, bq, s0, bk, qs, kt, sc);
    loops::online_softmax_rows(sc, bq, bk, g.seen0(t0, s0, bk), m, l, acc, g.E);
    if (g.dropout > 0)  // after l has counted them; the keys a row cannot see are 0 already
      for (int64_t i = 0; i < bq; ++i) {
        float d[kTile];
        const int64_t seen = g.visible(t0 + i, s0, bk);
        dropout_factors(g, ls, b, h, t0 + i, s0, seen, d);
        float* row = sc + i * bk;
#pragma omp simd
        for (int64_t j = 0; j < seen; ++j) row[j] *= d[j];
      }
    const Rows values = tile_rows(v + g.v_row(b, kvh), g.ldv(), s0, bk, g.E, stage);
    tiles::gemm(bq, g.E, bk, sc, bk, values.p, values.ld, acc, g.E, true,
                g.triangle(t0, s0, tiles::Triangle::depth));
  }
  T* o = static_cast<T*>(out[0]) + g.o_row(b, h, t0);
  float* lse = static_cast<float*>(out[1]) + (b * g.H + h) * g.T + t0;
  for (int64_t i = 0; i < bq; ++i) {
    const float inv = l[i] > 0 ? 1.f / l[i] : 0.f;
    store_tile(acc + i * g.E, 1, g.E, o + i * g.ldo(), g.ldo(), inv);
    lse[i] = l[i] > 0 ? m[i] + std::log(l[i]) : kNegInf;
  }
}

std::unique_ptr<Kernel> attention(const OpView& op, size_t&) {
  Check c(op);
  tdm_dtype dt;
  const Geometry g = check_operands(c, 0, 3, dt);
  return with_f32_bf16(dt, [&](auto tag) {
    using T = decltype(tag);
    return make_fn(c, [g](void* const* in, void* const* out, void*) {
      const LaunchState ls = launch_state(g, in);
      const int64_t heads = g.B * g.H, qt = g.tiles(g.T);
#pragma omp parallel for collapse(2) schedule(dynamic)
      for (int64_t bh = 0; bh < heads; ++bh)
        for (int64_t t = 0; t < qt; ++t) forward_tile<T>(g, ls, in, out, bh / g.H, bh % g.H, t * kTile);
    });
  });
}

// ---- the gradient

// Probabilities of a score tile from the saved lse (rows with lse = −inf,
// which attended nothing, give 0), and ds = p·(d·dp − Δ) in place of dp;
// p becomes d·p, what dv needs.
void probabilities_and_ds(const Geometry& g, const LaunchState& ls, int64_t b, int64_t h, int64_t t0,
                          int64_t bq, int64_t s0, int64_t bk, const float* lse, const float* delta, float* p,
                          float* dp) {
  if (g.dropout == 0) {
    loops::softmax_grad_rows(p, dp, bq, bk, g.seen0(t0, s0, bk), lse, delta);
    return;
  }
  for (int64_t i = 0; i < bq; ++i) {
    float* row = p + i * bk;
    float* dpi = dp + i * bk;
    // Keys the row cannot see have p = 0 and so ds = 0.
    const int64_t seen = lse[i] == kNegInf ? 0 : g.visible(t0 + i, s0, bk);
    std::fill(row + seen, row + bk, 0.f);
    std::fill(dpi + seen, dpi + bk, 0.f);
    const float li = lse[i];
#pragma omp simd
    for (int64_t j = 0; j < seen; ++j) row[j] -= li;
    loops::exp_inplace(row, seen);
    float d[kTile];
    dropout_factors(g, ls, b, h, t0 + i, s0, seen, d);
#pragma omp simd
    for (int64_t j = 0; j < seen; ++j) {
      dpi[j] = row[j] * (d[j] * dpi[j] - delta[i]);
      row[j] *= d[j];
    }
  }
}

// The tiles the backward reads, in one thread's scratch; dq_rows rows of
// dq accumulators after them (the one-pass backward's, else none). k and
// dout are the key and do rows (tile_rows: in place for f32, else kst and
// dst).
struct GradTiles {
  float *qs, *dst, *kst, *kt, *vst, *vt, *p, *ds, *acc, *acc2, *dq;
  Rows k{nullptr, 0}, dout{nullptr, 0};
  static GradTiles make(const Geometry& g, int64_t dq_rows = 0) {
    const int64_t n = kTile;
    float* f = scratch(size_t(n * (4 * g.D + 4 * g.E + 2 * n) + dq_rows * g.D));
    GradTiles t;
    t.qs = f, t.dst = t.qs + n * g.D, t.kst = t.dst + n * g.E, t.kt = t.kst + n * g.D;
    t.vst = t.kt + n * g.D, t.vt = t.vst + n * g.E, t.p = t.vt + n * g.E, t.ds = t.p + n * n;
    t.acc = t.ds + n * n, t.acc2 = t.acc + n * g.D, t.dq = t.acc2 + n * g.E;
    return t;
  }
};

template <class T>
struct GradIo {
  const T *dout, *q, *k, *v, *o;
  const float* lse;
  float* delta;  // [B, H, T] in the workspace
};

// Key tile s0 of kv head kvh of batch b: its rows k, kᵀ and vᵀ.
template <class T>
void load_keys(const Geometry& g, const GradIo<T>& io, int64_t b, int64_t kvh, int64_t s0, int64_t bk,
               GradTiles& w) {
  w.k = tile_rows(io.k + g.k_row(b, kvh), g.ldk(), s0, bk, g.D, w.kst);
  tiles::transpose(bk, g.D, w.k.p, w.k.ld, w.kt);
  const Rows values = tile_rows(io.v + g.v_row(b, kvh), g.ldv(), s0, bk, g.E, w.vst);
  tiles::transpose(bk, g.E, values.p, values.ld, w.vt);
}

// Δ = rowsum(do·o) of query rows [t0, t0 + bq) of (b, h); w.acc2 is scratch.
template <class T>
void delta_rows(const Geometry& g, const GradIo<T>& io, int64_t b, int64_t h, int64_t t0, int64_t bq,
                GradTiles& w) {
  const int64_t row0 = (b * g.H + h) * g.T + t0;
  w.dout = tile_rows(io.dout + g.o_row(b, h), g.ldo(), t0, bq, g.E, w.dst);
  const Rows o = tile_rows(io.o + g.o_row(b, h), g.ldo(), t0, bq, g.E, w.acc2);
  loops::row_dots(w.dout.p, w.dout.ld, o.p, o.ld, bq, g.E, io.delta + row0);
}

// One (query tile, key tile) pair of head h, whose key tile is loaded in w:
// the probabilities and ds, then dv += (d·p)ᵀ·do and dk += dsᵀ·(scale·q) into
// w.acc2 and w.acc, and, where dq is given, dq += ds·k (unscaled).
template <class T>
void grad_pair(const Geometry& g, const LaunchState& ls, const GradIo<T>& io, int64_t b, int64_t h,
               int64_t t0, int64_t s0, int64_t bk, GradTiles& w, float* dq) {
  const int64_t bq = std::min(kTile, g.T - t0), row0 = (b * g.H + h) * g.T + t0;
  load_tile(io.q + g.q_row(b, h), g.ldq(), t0, bq, g.D, w.qs, g.scale);
  w.dout = tile_rows(io.dout + g.o_row(b, h), g.ldo(), t0, bq, g.E, w.dst);
  const tiles::Causal unread = g.triangle(t0, s0, tiles::Triangle::output),
                      zeros = g.triangle(t0, s0, tiles::Triangle::depth);
  scores(g, ls, b, t0, bq, s0, bk, w.qs, w.kt, w.p);
  tiles::gemm(bq, bk, g.E, w.dout.p, w.dout.ld, w.vt, bk, w.ds, bk, false, unread);
  probabilities_and_ds(g, ls, b, h, t0, bq, s0, bk, io.lse + row0, io.delta + row0, w.p, w.ds);
  tiles::gemm_tn(bk, g.E, bq, w.p, bk, w.dout.p, w.dout.ld, w.acc2, g.E, true, zeros);
  tiles::gemm_tn(bk, g.D, bq, w.ds, bk, w.qs, g.D, w.acc, g.D, true, zeros);  // qs = scale·q: dk's scale
  if (dq != nullptr) tiles::gemm(bq, g.D, bk, w.ds, bk, w.k.p, w.k.ld, dq, g.D, true, zeros);
}

// dk and dv of key tile s0 of kv head kvh (w.acc, w.acc2) into the outputs.
template <class T>
void store_key_grads(const Geometry& g, int64_t b, int64_t kvh, int64_t s0, int64_t bk, const GradTiles& w,
                     T* dk, T* dv) {
  store_tile(w.acc, bk, g.D, dk + g.k_row(b, kvh, s0), g.ldk());
  store_tile(w.acc2, bk, g.E, dv + g.v_row(b, kvh, s0), g.ldv());
}

// Two-pass backward, pass 1: Δ and dq of one (b, h, query tile).
template <class T>
void dq_tile(const Geometry& g, const LaunchState& ls, const GradIo<T>& io, T* dq, int64_t b, int64_t h,
             int64_t t0) {
  GradTiles w = GradTiles::make(g);
  const int64_t bq = std::min(kTile, g.T - t0), row0 = (b * g.H + h) * g.T + t0, kvh = g.kv_head(h);
  load_tile(io.q + g.q_row(b, h), g.ldq(), t0, bq, g.D, w.qs, g.scale);
  delta_rows(g, io, b, h, t0, bq, w);
  std::fill(w.acc, w.acc + bq * g.D, 0.f);
  const int64_t end = g.key_end(t0 + bq);
  for (int64_t s0 = 0; s0 < end; s0 += kTile) {
    const int64_t bk = std::min(kTile, end - s0);
    load_keys(g, io, b, kvh, s0, bk, w);
    scores(g, ls, b, t0, bq, s0, bk, w.qs, w.kt, w.p);
    tiles::gemm(bq, bk, g.E, w.dout.p, w.dout.ld, w.vt, bk, w.ds, bk, false,
                g.triangle(t0, s0, tiles::Triangle::output));
    probabilities_and_ds(g, ls, b, h, t0, bq, s0, bk, io.lse + row0, io.delta + row0, w.p, w.ds);
    tiles::gemm(bq, g.D, bk, w.ds, bk, w.k.p, w.k.ld, w.acc, g.D, true,
                g.triangle(t0, s0, tiles::Triangle::depth));
  }
  store_tile(w.acc, bq, g.D, dq + g.q_row(b, h, t0), g.ldq(), g.scale);
}

// Two-pass backward, pass 2: dk and dv of one (b, kv head, key tile), from
// every query tile of every head in the group that can see it.
template <class T>
void dkv_tile(const Geometry& g, const LaunchState& ls, const GradIo<T>& io, T* dk, T* dv, int64_t b,
              int64_t kvh, int64_t s0) {
  GradTiles w = GradTiles::make(g);
  const int64_t bk = std::min(kTile, g.S - s0), group = g.H / g.G;
  load_keys(g, io, b, kvh, s0, bk, w);
  std::fill(w.acc, w.acc + bk * g.D, 0.f);
  std::fill(w.acc2, w.acc2 + bk * g.E, 0.f);
  for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
    for (int64_t t0 = g.query_begin(s0) / kTile * kTile; t0 < g.T; t0 += kTile)
      grad_pair(g, ls, io, b, h, t0, s0, bk, w, nullptr);
  store_key_grads(g, b, kvh, s0, bk, w, dk, dv);
}

// One-pass backward of one (b, kv head): every key tile once, each with
// every query tile of the group's heads that can see it, dq accumulated for
// all the group's rows at once. Saves the two-pass backward's second scores
// and do·vᵀ products (7 tile products per pair -> 5) and its second exp; the
// sums run in the same order, so dq, dk and dv are the same bits.
template <class T>
void dqkv_group(const Geometry& g, const LaunchState& ls, const GradIo<T>& io, T* dq, T* dk, T* dv, int64_t b,
                int64_t kvh) {
  const int64_t group = g.H / g.G, h0 = kvh * group;
  GradTiles w = GradTiles::make(g, group * g.T);
  for (int64_t h = h0; h < h0 + group; ++h)
    for (int64_t t0 = 0; t0 < g.T; t0 += kTile) delta_rows(g, io, b, h, t0, std::min(kTile, g.T - t0), w);
  std::fill(w.dq, w.dq + group * g.T * g.D, 0.f);
  for (int64_t s0 = 0; s0 < g.S; s0 += kTile) {
    const int64_t bk = std::min(kTile, g.S - s0);
    load_keys(g, io, b, kvh, s0, bk, w);
    std::fill(w.acc, w.acc + bk * g.D, 0.f);
    std::fill(w.acc2, w.acc2 + bk * g.E, 0.f);
    for (int64_t h = h0; h < h0 + group; ++h)
      for (int64_t t0 = g.query_begin(s0) / kTile * kTile; t0 < g.T; t0 += kTile)
        grad_pair(g, ls, io, b, h, t0, s0, bk, w, w.dq + ((h - h0) * g.T + t0) * g.D);
    store_key_grads(g, b, kvh, s0, bk, w, dk, dv);
  }
  for (int64_t h = h0; h < h0 + group; ++h)
    store_tile(w.dq + (h - h0) * g.T * g.D, g.T, g.D, dq + g.q_row(b, h), g.ldq(), g.scale);
}

// The one-pass backward runs a task per (b, kv head) and holds the group's
// dq in f32 (for GPT-2 small, 12 x 1024 x 64 floats, 3 MiB): taken when that
// fits in 8 MiB and there are at least two tasks per thread to balance;
// otherwise two passes with a task per tile. The choice depends on shapes and
// the thread count only, and both give the same bits.
bool one_pass_backward(const Geometry& g) {
  const int64_t dq_bytes = g.H / g.G * g.T * g.D * int64_t(sizeof(float));
  return dq_bytes <= (int64_t(8) << 20) && g.B * g.G >= 2 * omp_get_max_threads();
}

std::unique_ptr<Kernel> attention_grad(const OpView& op, size_t& ws) {
  Check c(op);
  tdm_dtype dt;
  const Geometry g = check_operands(c, 1, 6, dt);
  ws = size_t(g.B * g.H * g.T) * sizeof(float);  // Δ
  return with_f32_bf16(dt, [&](auto tag) {
    using T = decltype(tag);
    return make_fn(c, [g](void* const* in, void* const* out, void* workspace) {
      const LaunchState ls = launch_state(g, in);
      const GradIo<T> io{static_cast<const T*>(in[0]),  static_cast<const T*>(in[1]),
                         static_cast<const T*>(in[2]),  static_cast<const T*>(in[3]),
                         static_cast<const T*>(in[4]),  static_cast<const float*>(in[5]),
                         static_cast<float*>(workspace)};
      T* dq = static_cast<T*>(out[0]);
      T* dk = static_cast<T*>(out[1]);
      T* dv = static_cast<T*>(out[2]);
      const int64_t heads = g.B * g.H, kv_heads = g.B * g.G, qt = g.tiles(g.T), kt = g.tiles(g.S);
      if (one_pass_backward(g)) {
#pragma omp parallel for schedule(dynamic)
        for (int64_t bg = 0; bg < kv_heads; ++bg) dqkv_group<T>(g, ls, io, dq, dk, dv, bg / g.G, bg % g.G);
        return;
      }
#pragma omp parallel for collapse(2) schedule(dynamic)
      for (int64_t bh = 0; bh < heads; ++bh)
        for (int64_t t = 0; t < qt; ++t) dq_tile<T>(g, ls, io, dq, bh / g.H, bh % g.H, t * kTile);
#pragma omp parallel for collapse(2) schedule(dynamic)
      for (int64_t bg = 0; bg < kv_heads; ++bg)
        for (int64_t s = 0; s < kt; ++s) dkv_tile<T>(g, ls, io, dk, dv, bg / g.G, bg % g.G, s * kTile);
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("attention", attention);
  r.add("attention_grad", attention_grad);
});

}  // namespace

}  // namespace tandem::onednn
