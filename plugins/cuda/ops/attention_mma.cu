// CUDA backend — attention and its gradient on the tensor cores, for bf16
// and f16 storage: every product is the warp-level m16n8k16 mma.sync
// (sm_80 and newer) with f32 accumulators; the softmax, its statistics and
// ds stay f32 in registers. The split of the work follows ops/attention.cu's
// f32 kernels (a block per 64 queries in the forward and in dq, per 64 keys
// in dk and dv, inner tiles of 64; each kernel owns what it writes, no
// atomics, the same bits every run); math/attention_path.hpp says when
// these run.
//
// A block is 4 warps; warp w owns rows 16w..16w+15 of the block's 64 rows
// (queries, or keys in dk/dv). Tiles sit in shared memory as the stored
// 16-bit values, rows padded by 8 elements (16 bytes): 16-byte aligned for
// vector loads, and the 8 rows one fragment load touches fall in distinct
// banks. Fragments are read from shared memory at the places
// math/mma_layout.hpp gives; a product's accumulators become the next
// product's A operand in registers (scores → p for p·v, ds for ds·k).
//
// Forward (o, lse): s = q·kᵀ, online softmax per row (the quad of lanes
// that holds a row reduces with two shuffles), o += p·v. dq: s = q·kᵀ and
// dp = do·vᵀ recomputed per key tile, ds = p·(dp − Δ), dq += ds·k. dk, dv:
// per key tile over every query tile of every head of the group, sᵀ = k·qᵀ
// and dpᵀ = v·doᵀ, dv += pᵀ·do, dk += dsᵀ·q. The 16-bit rounding of p and
// ds before their products is what flash attention does too.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "math/attention_path.hpp"
#include "math/mma_layout.hpp"
#include "ops/attention_common.cuh"

namespace tandem::cuda {
namespace {

namespace mma = math::mma;

constexpr int kWarps = 4, kMmaThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // a block's queries (forward, dq) or keys (dk, dv)
constexpr int kCols = 64;           // the inner tile: keys (forward, dq) or queries (dk, dv)
constexpr int kPad = 8;             // elements of padding per shared-memory row
constexpr int kColTiles = kCols / 8;

__device__ __forceinline__ int tile_len(int tile, int64_t left) {
  return left < tile ? static_cast<int>(left) : tile;
}

// ---- fragments ---------------------------------------------------------

struct FragA {
  uint32_t r[4];
};
struct FragB {
  uint32_t r[2];
};

__device__ __forceinline__ uint32_t pair(const uint16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
__device__ __forceinline__ uint32_t pair_strided(const uint16_t* p, int stride) {
  return uint32_t(p[0]) | (uint32_t(p[stride]) << 16);
}

// A = x[row0 + i][k0 + j] of a row-major tile with rows `ld` apart.
__device__ __forceinline__ FragA load_a(const uint16_t* x, int ld, int row0, int k0) {
  const int lane = threadIdx.x % 32;
  FragA f;
#pragma unroll
  for (int reg = 0; reg < 4; ++reg) {
    const mma::Place p = mma::a_place(lane, reg);
    f.r[reg] = pair(x + (row0 + p.row) * ld + k0 + p.col);
  }
  return f;
}

// B[k][n] = y[n0 + n][k0 + k]: the tile's rows are B's columns (kᵀ from k).
__device__ __forceinline__ FragB load_b_rows(const uint16_t* y, int ld, int n0, int k0) {
  const int lane = threadIdx.x % 32;
  FragB f;
#pragma unroll
  for (int reg = 0; reg < 2; ++reg) {
    const mma::Place p = mma::b_place(lane, reg);
    f.r[reg] = pair(y + (n0 + p.col) * ld + k0 + p.row);
  }
  return f;
}

// B[k][n] = z[k0 + k][n0 + n]: the tile's rows are B's rows (v as it is).
__device__ __forceinline__ FragB load_b_cols(const uint16_t* z, int ld, int k0, int n0) {
  const int lane = threadIdx.x % 32;
  FragB f;
#pragma unroll
  for (int reg = 0; reg < 2; ++reg) {
    const mma::Place p = mma::b_place(lane, reg);
    f.r[reg] = pair_strided(z + (k0 + p.row) * ld + n0 + p.col, ld);
  }
  return f;
}

template <class T>
__device__ __forceinline__ uint32_t pack(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack<bf16_t>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack<f16_t>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The A fragment of k-columns [16j, 16j + 16) from the accumulators of the
// 8-column products 2j and 2j + 1 (mma_layout.hpp: the places agree).
template <class T>
__device__ __forceinline__ FragA a_from_c(const float (&c)[kColTiles][4], int j) {
  FragA f;
#pragma unroll
  for (int reg = 0; reg < 4; ++reg) {
    const float* acc = c[2 * j + mma::c_tile_of_a_reg(reg)];
    const int first = mma::c_first_of_a_reg(reg);
    f.r[reg] = pack<T>(acc[first], acc[first + 1]);
  }
  return f;
}

// c += a·b, one m16n8k16 product.
template <class T>
__device__ __forceinline__ void mma_sync(float (&c)[4], const FragA& a, const FragB& b) {
#if __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, bf16_t>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
  }
#else
  (void)c, (void)a, (void)b;
  __trap();  // prepare never picks these kernels below sm_80
#endif
}

template <int N>
__device__ __forceinline__ void zero(float (&c)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;
}

// Sum and maximum over the 4 lanes of a quad (the lanes holding one row).
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// ---- tiles in shared memory ---------------------------------------------

// Rows [r0, r0 + n) of `cols` columns, rows `ld` apart, into dst (rows
// cols + kPad apart); rows n..rows-1 are zeros (a partial tile adds
// nothing). 16-byte vectors where the rows allow.
template <class T>
__device__ void load_tile(const T* src, int64_t ld, int64_t r0, int n, int rows, int cols, uint16_t* dst) {
  const int stride = cols + kPad;
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  const bool vectors = ld % 8 == 0 && (reinterpret_cast<uintptr_t>(s) & 15) == 0;
  if (vectors) {
    const int per_row = cols / 8;
    for (int i = threadIdx.x; i < rows * per_row; i += blockDim.x) {
      const int r = i / per_row, c = i % per_row * 8;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r < n) v = *reinterpret_cast<const uint4*>(s + (r0 + r) * ld + c);
      *reinterpret_cast<uint4*>(dst + r * stride + c) = v;
    }
    return;
  }
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols;
    dst[r * stride + c] = r < n ? s[(r0 + r) * ld + c] : uint16_t(0);
  }
}

// ---- a warp's products over tiles -----------------------------------------

// c[j] = x[row0 + i][0..width) · y[8j + n][0..width)ᵀ: this warp's 16 rows of
// x against a tile's 64 rows of y (its rows are B's columns), over a head
// dim of `width`.
template <class T, int kHead>
__device__ __forceinline__ void rows_times_tile(const uint16_t* x, const uint16_t* y, int ld, int width,
                                                int row0, float (&c)[kColTiles][4]) {
  zero(c);
#pragma unroll
  for (int kk = 0; kk < kHead / 16; ++kk)
    if (kk * 16 < width) {
      const FragA xa = load_a(x, ld, row0, kk * 16);
#pragma unroll
      for (int j = 0; j < kColTiles; ++j) mma_sync<T>(c[j], xa, load_b_rows(y, ld, j * 8, kk * 16));
    }
}

// o[n] += p · z[0..64)[8n..8n+8) for the head-dim columns below `width`: p,
// this warp's 16 x 64 accumulators, as A (rounded to T), the tile as it is as B.
template <class T, int kHead>
__device__ __forceinline__ void acc_times_tile(const float (&p)[kColTiles][4], const uint16_t* z, int ld,
                                               int width, float (&o)[kHead / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < kCols / 16; ++kk) {
    const FragA pa = a_from_c<T>(p, kk);
#pragma unroll
    for (int n = 0; n < kHead / 8; ++n)
      if (n * 8 < width) mma_sync<T>(o[n], pa, load_b_cols(z, ld, kk * 16, n * 8));
  }
}

// ---- forward -----------------------------------------------------------

// One key tile's online-softmax step for this lane's two rows (row_t): the
// scores s scaled and masked (keys s0 + col, bk of them real), the running
// maxima m and sums l moved on, o rescaled, and exp(score − m) left in s.
template <int kHead>
__device__ __forceinline__ void online_softmax(const Attn& a, const uint8_t* mask, int64_t b,
                                               const int64_t (&row_t)[2], int64_t s0, int bk,
                                               float (&s)[kColTiles][4], float (&m)[2], float (&l)[2],
                                               float (&o)[kHead / 8][4]) {
  const int lane = threadIdx.x % 32;
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < kColTiles; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = j * 8 + mma::c_place(lane, i).col;
      const bool ok = allowed(a, mask, b, row_t[i >> 1], s0 + col, col < bk);
      s[j][i] = ok ? s[j][i] * a.scale : -INFINITY;
      mx[i >> 1] = fmaxf(mx[i >> 1], s[j][i]);
    }
  float alpha[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float m_new = fmaxf(m[r], quad_max(mx[r]));
    alpha[r] = math::online_rescale(m[r], m_new);
    m[r] = m_new;
  }
#pragma unroll
  for (int j = 0; j < kColTiles; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s[j][i] = math::online_prob(s[j][i], m[i >> 1]);
      sum[i >> 1] += s[j][i];
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + quad_sum(sum[r]);
#pragma unroll
  for (int n = 0; n < kHead / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) o[n][i] *= alpha[i >> 1];
}

template <class T, int kHead>
__global__ void __launch_bounds__(kMmaThreads) mma_attention_kernel(Attn a, AttnIo<T> io) {
  extern __shared__ __align__(16) uint16_t smem16[];
  const int ldq = a.D + kPad, ldv = a.E + kPad;
  uint16_t* qs = smem16;            // [kRows][D + 8]
  uint16_t* ks = qs + kRows * ldq;  // [kCols][D + 8]
  uint16_t* vs = ks + kCols * ldq;  // [kCols][E + 8]
  const int64_t tiles = (a.T + kRows - 1) / kRows, bh = blockIdx.x / tiles;
  const int64_t t0 =
      (tiles - 1 - blockIdx.x % tiles) * kRows;  // late tiles first: under causal they see most
  const int64_t b = bh / a.H, h = bh % a.H, g = h / a.group();
  const int bq = tile_len(kRows, a.T - t0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  load_tile(io.q + a.q_row(b, h), a.ldq(), t0, bq, kRows, a.D, qs);
  __syncthreads();
  FragA qa[kHead / 16];
#pragma unroll
  for (int kk = 0; kk < kHead / 16; ++kk)
    if (kk * 16 < a.D) qa[kk] = load_a(qs, ldq, warp * 16, kk * 16);
  float o[kHead / 8][4];
  zero(o);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const int64_t row_t[2] = {t0 + warp * 16 + lane / 4, t0 + warp * 16 + lane / 4 + 8};
  const int64_t end = a.key_end(t0 + bq);
  const int64_t warp_end = a.key_end(t0 + min(bq, warp * 16 + 16));
  for (int64_t s0 = 0; s0 < end; s0 += kCols) {
    const int bk = tile_len(kCols, end - s0);
    __syncthreads();  // every warp is done with the previous tile
    load_tile(io.k + a.k_row(b, g), a.ldk(), s0, bk, kCols, a.D, ks);
    load_tile(io.v + a.v_row(b, g), a.ldv(), s0, bk, kCols, a.E, vs);
    __syncthreads();
    if (s0 >= warp_end) continue;  // under causal: keys after this warp's last query
    float s[kColTiles][4];
    zero(s);
#pragma unroll
    for (int kk = 0; kk < kHead / 16; ++kk)
      if (kk * 16 < a.D)
#pragma unroll
        for (int j = 0; j < kColTiles; ++j) mma_sync<T>(s[j], qa[kk], load_b_rows(ks, ldq, j * 8, kk * 16));
    online_softmax<kHead>(a, io.mask, b, row_t, s0, bk, s, m, l, o);
    acc_times_tile<T, kHead>(s, vs, ldv, a.E, o);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t t = row_t[r];
    if (t >= t0 + bq) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    const int64_t at = a.o_row(b, h, t);
#pragma unroll
    for (int n = 0; n < kHead / 8; ++n) {
      const int col = n * 8 + mma::c_place(lane, 0).col;
      if (col < a.E) {
        st(io.out, at + col, o[n][2 * r] * inv);
        st(io.out, at + col + 1, o[n][2 * r + 1] * inv);
      }
    }
    if (lane % 4 == 0) io.lse_out[bh * a.T + t] = math::online_lse(m[r], l[r]);
  }
}

// ---- backward: dq --------------------------------------------------------

// p and ds of one score (scaled) with its row's lse and Δ.
__device__ __forceinline__ void p_and_ds(float score, float dp, float lse, float delta, bool ok, float& p,
                                         float& ds) {
  p = math::attention_prob(score, lse, ok);
  ds = math::attention_ds(p, 1.0f, dp, delta);
}

template <class T, int kHead>
__global__ void __launch_bounds__(kMmaThreads) mma_attention_dq_kernel(Attn a, AttnIo<T> io) {
  extern __shared__ __align__(16) uint16_t smem16[];
  const int ldq = a.D + kPad, ldv = a.E + kPad;
  uint16_t* qs = smem16;             // [kRows][D + 8]
  uint16_t* dos = qs + kRows * ldq;  // [kRows][E + 8]
  uint16_t* ks = dos + kRows * ldv;  // [kCols][D + 8]
  uint16_t* vs = ks + kCols * ldq;   // [kCols][E + 8]
  const int64_t tiles = (a.T + kRows - 1) / kRows, bh = blockIdx.x / tiles;
  const int64_t t0 = (tiles - 1 - blockIdx.x % tiles) * kRows;
  const int64_t b = bh / a.H, h = bh % a.H, g = h / a.group();
  const int bq = tile_len(kRows, a.T - t0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  load_tile(io.q + a.q_row(b, h), a.ldq(), t0, bq, kRows, a.D, qs);
  load_tile(io.dout + a.o_row(b, h), a.ldo(), t0, bq, kRows, a.E, dos);
  const int64_t row_t[2] = {t0 + warp * 16 + lane / 4, t0 + warp * 16 + lane / 4 + 8};
  float lse[2], delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const bool in = row_t[r] < t0 + bq;
    lse[r] = in ? io.lse[bh * a.T + row_t[r]] : -INFINITY;
    delta[r] = in ? io.delta[bh * a.T + row_t[r]] : 0.0f;
  }
  float dq[kHead / 8][4];
  zero(dq);
  const int64_t end = a.key_end(t0 + bq);
  const int64_t warp_end = a.key_end(t0 + min(bq, warp * 16 + 16));
  for (int64_t s0 = 0; s0 < end; s0 += kCols) {
    const int bk = tile_len(kCols, end - s0);
    __syncthreads();
    load_tile(io.k + a.k_row(b, g), a.ldk(), s0, bk, kCols, a.D, ks);
    load_tile(io.v + a.v_row(b, g), a.ldv(), s0, bk, kCols, a.E, vs);
    __syncthreads();
    if (s0 >= warp_end) continue;
    float s[kColTiles][4], dp[kColTiles][4];
    rows_times_tile<T, kHead>(qs, ks, ldq, a.D, warp * 16, s);    // s = q·kᵀ
    rows_times_tile<T, kHead>(dos, vs, ldv, a.E, warp * 16, dp);  // dp = do·vᵀ
#pragma unroll
    for (int j = 0; j < kColTiles; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int col = j * 8 + mma::c_place(lane, i).col, r = i >> 1;
        const bool ok = allowed(a, io.mask, b, row_t[r], s0 + col, col < bk && row_t[r] < t0 + bq);
        float p;
        p_and_ds(s[j][i] * a.scale, dp[j][i], lse[r], delta[r], ok, p, s[j][i]);  // s now holds ds
      }
    acc_times_tile<T, kHead>(s, ks, ldq, a.D, dq);  // dq += ds·k
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row_t[r] >= t0 + bq) continue;
    const int64_t at = a.q_row(b, h, row_t[r]);
#pragma unroll
    for (int n = 0; n < kHead / 8; ++n) {
      const int col = n * 8 + mma::c_place(lane, 0).col;
      if (col < a.D) {
        st(io.dq, at + col, dq[n][2 * r] * a.scale);
        st(io.dq, at + col + 1, dq[n][2 * r + 1] * a.scale);
      }
    }
  }
}

// ---- backward: dk, dv ----------------------------------------------------

template <class T, int kHead>
__global__ void __launch_bounds__(kMmaThreads) mma_attention_dkv_kernel(Attn a, AttnIo<T> io) {
  extern __shared__ __align__(16) uint16_t smem16[];
  const int ldq = a.D + kPad, ldv = a.E + kPad;
  uint16_t* ks = smem16;                                       // [kRows][D + 8]: this block's keys
  uint16_t* vs = ks + kRows * ldq;                             // [kRows][E + 8]
  uint16_t* qs = vs + kRows * ldv;                             // [kCols][D + 8]: a query tile
  uint16_t* dos = qs + kCols * ldq;                            // [kCols][E + 8]
  float* stats = reinterpret_cast<float*>(dos + kCols * ldv);  // lse [kCols], Δ [kCols]
  const int64_t tiles = (a.S + kRows - 1) / kRows, kv = blockIdx.x / tiles, s0 = (blockIdx.x % tiles) * kRows;
  const int64_t b = kv / a.G, g = kv % a.G;
  const int bk = tile_len(kRows, a.S - s0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  load_tile(io.k + a.k_row(b, g), a.ldk(), s0, bk, kRows, a.D, ks);
  load_tile(io.v + a.v_row(b, g), a.ldv(), s0, bk, kRows, a.E, vs);
  const int64_t key[2] = {s0 + warp * 16 + lane / 4, s0 + warp * 16 + lane / 4 + 8};
  float dk[kHead / 8][4], dv[kHead / 8][4];
  zero(dk);
  zero(dv);
  for (int64_t h = g * a.group(); h < (g + 1) * a.group(); ++h)
    for (int64_t t0 = a.query_begin(s0); t0 < a.T; t0 += kCols) {
      const int bq = tile_len(kCols, a.T - t0);
      const int64_t bh = b * a.H + h;
      __syncthreads();  // the previous query tile is no longer read (and ks, vs are written)
      load_tile(io.q + a.q_row(b, h), a.ldq(), t0, bq, kCols, a.D, qs);
      load_tile(io.dout + a.o_row(b, h), a.ldo(), t0, bq, kCols, a.E, dos);
      for (int i = threadIdx.x; i < kCols; i += blockDim.x) {
        stats[i] = i < bq ? io.lse[bh * a.T + t0 + i] : -INFINITY;
        stats[kCols + i] = i < bq ? io.delta[bh * a.T + t0 + i] : 0.0f;
      }
      __syncthreads();
      float st_[kColTiles][4], dpt[kColTiles][4];                    // sᵀ then pᵀ; dpᵀ then dsᵀ
      rows_times_tile<T, kHead>(ks, qs, ldq, a.D, warp * 16, st_);   // sᵀ = k·qᵀ
      rows_times_tile<T, kHead>(vs, dos, ldv, a.E, warp * 16, dpt);  // dpᵀ = v·doᵀ
#pragma unroll
      for (int j = 0; j < kColTiles; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int col = j * 8 + mma::c_place(lane, i).col, r = i >> 1;
          const int64_t s = key[r];
          const bool ok = allowed(a, io.mask, b, t0 + col, s, col < bq && s < s0 + bk);
          p_and_ds(st_[j][i] * a.scale, dpt[j][i], stats[col], stats[kCols + col], ok, st_[j][i], dpt[j][i]);
        }
      acc_times_tile<T, kHead>(st_, dos, ldv, a.E, dv);  // dv += pᵀ·do
      acc_times_tile<T, kHead>(dpt, qs, ldq, a.D, dk);   // dk += dsᵀ·q
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (key[r] >= s0 + bk) continue;
    const int64_t k_at = a.k_row(b, g, key[r]), v_at = a.v_row(b, g, key[r]);
#pragma unroll
    for (int n = 0; n < kHead / 8; ++n) {
      const int col = n * 8 + mma::c_place(lane, 0).col;
      if (col < a.D) {
        st(io.dk, k_at + col, dk[n][2 * r] * a.scale);
        st(io.dk, k_at + col + 1, dk[n][2 * r + 1] * a.scale);
      }
      if (col < a.E) {
        st(io.dv, v_at + col, dv[n][2 * r]);
        st(io.dv, v_at + col + 1, dv[n][2 * r + 1]);
      }
    }
  }
}

// ---- launches ------------------------------------------------------------

size_t forward_bytes(int D, int E) {
  return sizeof(uint16_t) * size_t((kRows + kCols) * (D + kPad) + kCols * (E + kPad));
}
size_t dq_bytes(int D, int E) {
  return sizeof(uint16_t) * size_t((kRows + kCols) * (D + kPad + E + kPad));
}
size_t dkv_bytes(int D, int E) {
  return dq_bytes(D, E) + sizeof(float) * 2 * kCols;
}

// Calls f with the kernel instantiation for the head dims: 64 or 128 columns
// of accumulators.
template <class F>
void by_head(const Attn& a, F&& f) {
  if (a.D <= 64 && a.E <= 64)
    f(std::integral_constant<int, 64>{});
  else
    f(std::integral_constant<int, 128>{});
}

unsigned blocks_of(int64_t heads, int64_t n) {
  return static_cast<unsigned>(heads * ((n + kRows - 1) / kRows));
}

}  // namespace

size_t mma_attention_smem(int D, int E) {
  return std::max(forward_bytes(D, E), dkv_bytes(D, E));
}

void allow_mma_attention_smem(int limit) {
  const int most = static_cast<int>(std::min<size_t>(mma_attention_smem(128, 128), size_t(limit)));
  auto allow = [most](auto kernel) {
    TDM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
  };
  allow(mma_attention_kernel<bf16_t, 64>), allow(mma_attention_kernel<bf16_t, 128>);
  allow(mma_attention_kernel<f16_t, 64>), allow(mma_attention_kernel<f16_t, 128>);
  allow(mma_attention_dq_kernel<bf16_t, 64>), allow(mma_attention_dq_kernel<bf16_t, 128>);
  allow(mma_attention_dq_kernel<f16_t, 64>), allow(mma_attention_dq_kernel<f16_t, 128>);
  allow(mma_attention_dkv_kernel<bf16_t, 64>), allow(mma_attention_dkv_kernel<bf16_t, 128>);
  allow(mma_attention_dkv_kernel<f16_t, 64>), allow(mma_attention_dkv_kernel<f16_t, 128>);
}

template <class T>
void launch_mma_attention(const Attn& a, const AttnIo<T>& io, cudaStream_t stream) {
  const unsigned blocks = blocks_of(a.B * a.H, a.T);
  if (blocks == 0) return;
  by_head(a, [&](auto head) {
    mma_attention_kernel<T, decltype(head)::value>
        <<<blocks, kMmaThreads, forward_bytes(a.D, a.E), stream>>>(a, io);
  });
}

template <class T>
void launch_mma_attention_grad(const Attn& a, const AttnIo<T>& io, cudaStream_t stream) {
  const unsigned q_blocks = blocks_of(a.B * a.H, a.T), kv_blocks = blocks_of(a.B * a.G, a.S);
  by_head(a, [&](auto head) {
    if (q_blocks > 0)
      mma_attention_dq_kernel<T, decltype(head)::value>
          <<<q_blocks, kMmaThreads, dq_bytes(a.D, a.E), stream>>>(a, io);
    if (kv_blocks > 0)
      mma_attention_dkv_kernel<T, decltype(head)::value>
          <<<kv_blocks, kMmaThreads, dkv_bytes(a.D, a.E), stream>>>(a, io);
  });
}

template void launch_mma_attention<bf16_t>(const Attn&, const AttnIo<bf16_t>&, cudaStream_t);
template void launch_mma_attention<f16_t>(const Attn&, const AttnIo<f16_t>&, cudaStream_t);
template void launch_mma_attention_grad<bf16_t>(const Attn&, const AttnIo<bf16_t>&, cudaStream_t);
template void launch_mma_attention_grad<f16_t>(const Attn&, const AttnIo<f16_t>&, cudaStream_t);

}  // namespace tandem::cuda
