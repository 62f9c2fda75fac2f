// CUDA backend — attention and its gradient: own flash-attention-style
// kernels, so no more than one tile of the T x S scores exists at a time
// (in shared memory). Prepare picks the tensor-core kernels of
// ops/attention_mma.cu where math/attention_path.hpp says they apply (bf16
// and f16 without dropout: "attention:mma"); the kernels here, f32
// arithmetic whatever the storage dtype, take every case
// ("attention:f32_tiles").
//
// Blocks of 256 threads as a 16 x 16 grid over a tile, per-row accumulators
// over the head dim in registers (head dims up to 128): ops/attention_tiles.cuh.
// Tiles are 64 x 32 in the forward (more queries per block: each key tile
// loaded is used twice as often), 32 x 32 in the backward (more operands per
// tile); all fit the 99 KiB of shared memory of the smallest sm_8x block at
// head dims of 128.
//
// Forward: a block per (b, h, 64 queries) streams the keys in tiles of 32
// (online softmax: running maximum m, sum l, o rescaled when m grows; the
// counter-mask dropout multiplies p after l has counted it); o = acc / l,
// lse = m + log l. Backward, recomputing p from lse: (1) Δ = rowsum(do·o),
// a warp per row, into the workspace; (2) dq per (b, h, 32 queries) from
// every key tile; (3) dk, dv per (b, kv head, 32 keys) from every query tile
// of every head of its group. Each kernel owns what it writes: no atomics,
// the same bits on every run. The per-element rules are math/attention.hpp.
// Layout "bthd" (heads after the positions) changes only where a head's rows
// are read and written (Attn::row): a head's rows are then heads x width
// apart instead of width.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "device.hpp"
#include "math/attention.hpp"
#include "math/attention_path.hpp"
#include "ops/attention_common.cuh"
#include "ops/attention_tiles.cuh"

namespace tandem::cuda {
namespace {

using namespace tiles;

// Rows per thread (tile rows / 16) and columns per thread (tile columns / 16).
constexpr int kFwdR = 4, kFwdC = 2;  // forward: 64 queries x 32 keys
constexpr int kDqR = 2, kDqC = 2;    // dq: 32 queries x 32 keys
constexpr int kKvR = 2, kKvC = 2;    // dk, dv: 32 keys x 32 queries

// ---- forward -----------------------------------------------------------

// Folds the score tile of queries t0 + row and keys s0 + col (bk of them
// real) into the running m, l and acc, and leaves d·p in ps.
template <int R, int C>
__device__ void softmax_tile(const Attn& a, const uint8_t* mask, uint64_t seed, int64_t b, int64_t h,
                             int64_t t0, int64_t s0, int bk, float (&sc)[R][C], float (&m)[R], float (&l)[R],
                             float (&acc)[R][kHeadCols], float* ps) {
  const int ty = tid_y(), tx = tid_x(), ldp = kSide * C + 1;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t t = t0 + ty + kSide * r;
    float mx = -INFINITY;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int j = tx + kSide * c;
      if (!allowed(a, mask, b, t, s0 + j, j < bk)) sc[r][c] = -INFINITY;
      mx = fmaxf(mx, sc[r][c]);
    }
    const float m_new = fmaxf(m[r], row_max(mx));
    const float alpha = math::online_rescale(m[r], m_new);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      sc[r][c] = math::online_prob(sc[r][c], m_new);
      sum += sc[r][c];
    }
    l[r] = l[r] * alpha + row_sum(sum);
    m[r] = m_new;
#pragma unroll
    for (int e = 0; e < kHeadCols; ++e) acc[r][e] *= alpha;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int j = tx + kSide * c;
      float d = 1.0f;
      if (a.dropout > 0.0f && sc[r][c] != 0.0f)
        d = math::attention_dropout(seed, math::attention_flat_index(b, h, t, s0 + j, a.H, a.T, a.S),
                                    a.dropout, a.inv_keep);
      ps[(ty + kSide * r) * ldp + j] = sc[r][c] * d;
    }
  }
}

constexpr size_t forward_smem(int D, int E) {
  constexpr int BQ = kSide * kFwdR, BK = kSide * kFwdC;
  return sizeof(float) * size_t(BQ * (D + 1) + D * (BK + 1) + BK * E + BQ * (BK + 1));
}

template <class T>
__global__ void __launch_bounds__(kAttnThreads) attention_kernel(Attn a, AttnIo<T> io) {
  constexpr int R = kFwdR, C = kFwdC, BQ = kSide * R, BK = kSide * C;
  extern __shared__ float smem[];
  float* qs = smem;                 // [BQ][D+1]: q·scale
  float* kt = qs + BQ * (a.D + 1);  // [D][BK+1]: kᵀ
  float* vs = kt + a.D * (BK + 1);  // [BK][E]
  float* ps = vs + BK * a.E;        // [BQ][BK+1]: d·p
  const int64_t tiles = (a.T + BQ - 1) / BQ, bh = blockIdx.x / tiles;
  const int64_t t0 = (tiles - 1 - blockIdx.x % tiles) * BQ;  // late tiles first: under causal they see most
  const int64_t b = bh / a.H, h = bh % a.H, g = h / a.group();
  const int bq = tile_len(BQ, a.T - t0);
  const uint64_t seed = seed_of(a, io.seed_offset);
  load_rows(io.q + a.q_row(b, h), a.ldq(), t0, bq, BQ, a.D, a.scale, qs, a.D + 1);
  float m[R], l[R], acc[R][kHeadCols];
#pragma unroll
  for (int r = 0; r < R; ++r) m[r] = -INFINITY, l[r] = 0.0f;
  zero(acc);
  const int64_t end = a.key_end(t0 + bq);
  for (int64_t s0 = 0; s0 < end; s0 += BK) {
    const int bk = tile_len(BK, end - s0);
    __syncthreads();  // every thread is done with the previous tile (and qs is written)
    load_rows_t(io.k + a.k_row(b, g), a.ldk(), s0, bk, BK, a.D, 1.0f, kt, BK + 1);
    load_rows(io.v + a.v_row(b, g), a.ldv(), s0, bk, BK, a.E, 1.0f, vs, a.E);
    __syncthreads();
    float sc[R][C];
    tile_dot(qs, a.D + 1, kt, BK + 1, a.D, sc);
    softmax_tile(a, io.mask, seed, b, h, t0, s0, bk, sc, m, l, acc, ps);
    __syncthreads();
    tile_accumulate(ps, BK + 1, bk, vs, a.E, 1, a.E, acc);
  }
  const int ty = tid_y(), tx = tid_x();
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int i = ty + kSide * r;
    if (i >= bq) continue;
    const int64_t row = bh * a.T + t0 + i, o_row = a.o_row(b, h, t0 + i);
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#pragma unroll
    for (int c = 0; c < kHeadCols; ++c)
      if (tx + kSide * c < a.E) st(io.out, o_row + tx + kSide * c, acc[r][c] * inv);
    if (tx == 0) io.lse_out[row] = math::online_lse(m[r], l[r]);
  }
}

// ---- backward ----------------------------------------------------------

// Δ_t = do·o of each (b, h, t) row (delta in [B, H, T] order), a warp per row.
template <class T>
__global__ void attention_delta_kernel(Attn a, const T* dout, const T* o, float* delta, int64_t rows) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; row < rows; row += warps) {
    const int64_t at = a.o_row(row / (a.H * a.T), row / a.T % a.H, row % a.T);
    float s = 0.0f;
    for (int e = lane; e < a.E; e += 32) s += ld(dout, at + e) * ld(o, at + e);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) delta[row] = s;
  }
}

// For one (t, s): pd = d·p (what dv needs) and ds = p·(d·dp − Δ).
__device__ __forceinline__ void grad_element(const Attn& a, const uint8_t* mask, uint64_t seed, int64_t b,
                                             int64_t h, int64_t t, int64_t s, bool in_tile, float score,
                                             float dp, float lse, float delta, float& pd, float& ds) {
  const float p = math::attention_prob(score, lse, allowed(a, mask, b, t, s, in_tile));
  float d = 1.0f;
  if (a.dropout > 0.0f && p != 0.0f)
    d = math::attention_dropout(seed, math::attention_flat_index(b, h, t, s, a.H, a.T, a.S), a.dropout,
                                a.inv_keep);
  pd = d * p;
  ds = math::attention_ds(p, d, dp, delta);
}

constexpr size_t dq_smem(int D, int E) {
  constexpr int BQ = kSide * kDqR, BK = kSide * kDqC;
  return sizeof(float) * size_t(BQ * (D + 1) + BQ * (E + 1) + D * (BK + 1) + E * (BK + 1) + BQ * (BK + 1));
}

template <class T>
__global__ void __launch_bounds__(kAttnThreads) attention_dq_kernel(Attn a, AttnIo<T> io) {
  constexpr int R = kDqR, C = kDqC, BQ = kSide * R, BK = kSide * C;
  extern __shared__ float smem[];
  float* qs = smem;                  // [BQ][D+1]: q·scale
  float* dos = qs + BQ * (a.D + 1);  // [BQ][E+1]: do
  float* kt = dos + BQ * (a.E + 1);  // [D][BK+1]: kᵀ
  float* vt = kt + a.D * (BK + 1);   // [E][BK+1]: vᵀ
  float* dss = vt + a.E * (BK + 1);  // [BQ][BK+1]: ds
  const int64_t tiles = (a.T + BQ - 1) / BQ, bh = blockIdx.x / tiles;
  const int64_t t0 = (tiles - 1 - blockIdx.x % tiles) * BQ;
  const int64_t b = bh / a.H, h = bh % a.H, g = h / a.group();
  const int bq = tile_len(BQ, a.T - t0);
  const int ty = tid_y(), tx = tid_x();
  const uint64_t seed = seed_of(a, io.seed_offset);
  load_rows(io.q + a.q_row(b, h), a.ldq(), t0, bq, BQ, a.D, a.scale, qs, a.D + 1);
  load_rows(io.dout + a.o_row(b, h), a.ldo(), t0, bq, BQ, a.E, 1.0f, dos, a.E + 1);
  float lse[R], delta[R], acc[R][kHeadCols];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int i = ty + kSide * r;
    lse[r] = i < bq ? io.lse[bh * a.T + t0 + i] : -INFINITY;
    delta[r] = i < bq ? io.delta[bh * a.T + t0 + i] : 0.0f;
  }
  zero(acc);
  const int64_t end = a.key_end(t0 + bq);
  for (int64_t s0 = 0; s0 < end; s0 += BK) {
    const int bk = tile_len(BK, end - s0);
    __syncthreads();
    load_rows_t(io.k + a.k_row(b, g), a.ldk(), s0, bk, BK, a.D, 1.0f, kt, BK + 1);
    load_rows_t(io.v + a.v_row(b, g), a.ldv(), s0, bk, BK, a.E, 1.0f, vt, BK + 1);
    __syncthreads();
    float sc[R][C], dp[R][C];
    tile_dot(qs, a.D + 1, kt, BK + 1, a.D, sc);
    tile_dot(dos, a.E + 1, vt, BK + 1, a.E, dp);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const int i = ty + kSide * r, j = tx + kSide * c;
        float pd;
        grad_element(a, io.mask, seed, b, h, t0 + i, s0 + j, i < bq && j < bk, sc[r][c], dp[r][c], lse[r],
                     delta[r], pd, dss[i * (BK + 1) + j]);
      }
    __syncthreads();
    tile_accumulate(dss, BK + 1, bk, kt, 1, BK + 1, a.D, acc);  // dq += ds·k, k read from kᵀ
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int i = ty + kSide * r;
    if (i >= bq) continue;
#pragma unroll
    for (int c = 0; c < kHeadCols; ++c)
      if (tx + kSide * c < a.D) st(io.dq, a.q_row(b, h, t0 + i) + tx + kSide * c, acc[r][c] * a.scale);
  }
}

constexpr size_t dkv_smem(int D, int E) {
  constexpr int BK = kSide * kKvR, BQ = kSide * kKvC;
  return sizeof(float) *
         size_t(BK * (D + 1) + BK * (E + 1) + D * (BQ + 1) + E * (BQ + 1) + 2 * BK * (BQ + 1) + 2 * BQ);
}

// Query rows [t0, t0 + bq) of head h of batch b: (q·scale)ᵀ, doᵀ, and their lse and Δ.
template <class T>
__device__ void load_query_tile(const Attn& a, const AttnIo<T>& io, int64_t b, int64_t h, int64_t t0, int bq,
                                float* qt, float* dot, float* stats) {
  constexpr int BQ = kSide * kKvC;
  const int64_t bh = b * a.H + h;
  load_rows_t(io.q + a.q_row(b, h), a.ldq(), t0, bq, BQ, a.D, a.scale, qt, BQ + 1);
  load_rows_t(io.dout + a.o_row(b, h), a.ldo(), t0, bq, BQ, a.E, 1.0f, dot, BQ + 1);
  for (int i = threadIdx.x; i < BQ; i += blockDim.x) {
    stats[i] = i < bq ? io.lse[bh * a.T + t0 + i] : -INFINITY;
    stats[BQ + i] = i < bq ? io.delta[bh * a.T + t0 + i] : 0.0f;
  }
}

template <class T>
__global__ void __launch_bounds__(kAttnThreads) attention_dkv_kernel(Attn a, AttnIo<T> io) {
  constexpr int R = kKvR, C = kKvC, BK = kSide * R, BQ = kSide * C;
  extern __shared__ float smem[];
  float* ks = smem;                    // [BK][D+1]: k
  float* vs = ks + BK * (a.D + 1);     // [BK][E+1]: v
  float* qt = vs + BK * (a.E + 1);     // [D][BQ+1]: (q·scale)ᵀ
  float* dot = qt + a.D * (BQ + 1);    // [E][BQ+1]: doᵀ
  float* pt = dot + a.E * (BQ + 1);    // [BK][BQ+1]: (d·p)ᵀ
  float* dst = pt + BK * (BQ + 1);     // [BK][BQ+1]: dsᵀ
  float* stats = dst + BK * (BQ + 1);  // lse [BQ], Δ [BQ]
  const int64_t tiles = (a.S + BK - 1) / BK, kv = blockIdx.x / tiles, s0 = (blockIdx.x % tiles) * BK;
  const int64_t b = kv / a.G, g = kv % a.G;
  const int bk = tile_len(BK, a.S - s0);
  const int ty = tid_y(), tx = tid_x();
  const uint64_t seed = seed_of(a, io.seed_offset);
  load_rows(io.k + a.k_row(b, g), a.ldk(), s0, bk, BK, a.D, 1.0f, ks, a.D + 1);
  load_rows(io.v + a.v_row(b, g), a.ldv(), s0, bk, BK, a.E, 1.0f, vs, a.E + 1);
  float dk[R][kHeadCols], dv[R][kHeadCols];
  zero(dk);
  zero(dv);
  for (int64_t h = g * a.group(); h < (g + 1) * a.group(); ++h)
    for (int64_t t0 = a.query_begin(s0); t0 < a.T; t0 += BQ) {
      const int bq = tile_len(BQ, a.T - t0);
      __syncthreads();  // the previous query tile is no longer read (and ks, vs are written)
      load_query_tile(a, io, b, h, t0, bq, qt, dot, stats);
      __syncthreads();
      float sc[R][C], dp[R][C];
      tile_dot(ks, a.D + 1, qt, BQ + 1, a.D, sc);
      tile_dot(vs, a.E + 1, dot, BQ + 1, a.E, dp);
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const int j = ty + kSide * r, i = tx + kSide * c;
          grad_element(a, io.mask, seed, b, h, t0 + i, s0 + j, i < bq && j < bk, sc[r][c], dp[r][c], stats[i],
                       stats[BQ + i], pt[j * (BQ + 1) + i], dst[j * (BQ + 1) + i]);
        }
      __syncthreads();
      tile_accumulate(pt, BQ + 1, bq, dot, 1, BQ + 1, a.E, dv);  // dv += (d·p)ᵀ·do
      tile_accumulate(dst, BQ + 1, bq, qt, 1, BQ + 1, a.D, dk);  // dk += dsᵀ·(q·scale)
    }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int j = ty + kSide * r;
    if (j >= bk) continue;
    const int64_t k_row = a.k_row(b, g, s0 + j), v_row = a.v_row(b, g, s0 + j);
#pragma unroll
    for (int c = 0; c < kHeadCols; ++c) {
      const int col = tx + kSide * c;
      if (col < a.D) st(io.dk, k_row + col, dk[r][c]);
      if (col < a.E) st(io.dv, v_row + col, dv[r][c]);
    }
  }
}

// ---- prepare -----------------------------------------------------------

// q, k, v at inputs first..first+2; the optional mask and seed_offset at
// `extras` and `extras + 1` (o says which are there). The kernels' Attn in f32.
Attn check_operands(const Check& c, size_t first, size_t extras, tdm_dtype& dt, AttentionOperands& o) {
  dt = c.primary_dtype(first, kFloat);
  o = check_attention_operands(c, first, extras, dt);
  if (o.D > kMaxHead || o.E > kMaxHead)
    c.unsupported("head dims above " + std::to_string(kMaxHead) +
                  " are not implemented (D = " + std::to_string(o.D) + ", E = " + std::to_string(o.E) +
                  "): a row of the head dim is kept in registers, 8 columns in each of 16 threads");
  Attn a;
  a.B = o.B, a.H = o.H, a.G = o.G, a.T = o.T, a.S = o.S;
  a.D = static_cast<int>(o.D), a.E = static_cast<int>(o.E);
  a.causal = o.causal;
  a.layout = o.layout;
  a.scale = static_cast<float>(o.scale);
  a.dropout = static_cast<float>(o.dropout);
  a.inv_keep = static_cast<float>(1 / (1 - o.dropout));
  a.seed = o.seed;
  return a;
}

// Blocks of a flattened grid: heads x tiles of `tile` along n; declined past
// what gridDim.x holds.
unsigned grid_of(const Check& c, int64_t heads, int64_t n, int tile) {
  const int64_t blocks = heads * ((n + tile - 1) / tile);
  if (blocks > 0x7fffffff)
    c.unsupported("too many tiles for one launch (" + std::to_string(blocks) + " blocks)");
  return static_cast<unsigned>(blocks);
}

// Checks that `bytes` of dynamic shared memory fit a block of this device
// and lets `kernel` use up to what the largest head dims need (the same
// value for every prepare, so no prepare lowers another's limit).
// The dynamic shared memory a block of this device may have, opted in.
size_t smem_limit(const CudaDevice& device) {
  int limit = 0;
  TDM_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device.index()));
  return size_t(limit);
}

template <class K>
void reserve_smem(const Check& c, const CudaDevice& device, K* kernel, size_t bytes, size_t most) {
  const size_t limit = smem_limit(device);
  if (bytes > limit)
    c.unsupported("these head dims need " + std::to_string(bytes) +
                  " bytes of shared memory per block, the device allows " + std::to_string(limit));
  TDM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(std::min(most, limit))));
}

template <class T>
AttnIo<T> common_io(const AttentionOperands& o, void* const* in, size_t first) {
  AttnIo<T> io;
  io.q = static_cast<const T*>(in[first]);
  io.k = static_cast<const T*>(in[first + 1]);
  io.v = static_cast<const T*>(in[first + 2]);
  if (o.has_mask) io.mask = static_cast<const uint8_t*>(in[o.mask_slot]);
  if (o.has_offset) io.seed_offset = static_cast<const int64_t*>(in[o.offset_slot]);
  return io;
}

// The gradient's pointers: do, q, k, v, o, lse in, dq, dk, dv out, Δ in the workspace.
template <class T>
AttnIo<T> grad_io(const AttentionOperands& operands, void* const* in, void* const* o, void* ws) {
  AttnIo<T> io = common_io<T>(operands, in, 1);
  io.dout = static_cast<const T*>(in[0]);
  io.o = static_cast<const T*>(in[4]);
  io.lse = static_cast<const float*>(in[5]);
  io.delta = static_cast<float*>(ws);
  io.dq = static_cast<T*>(o[0]);
  io.dk = static_cast<T*>(o[1]);
  io.dv = static_cast<T*>(o[2]);
  return io;
}

// Whether the tensor-core kernels run this attention: not with
// --plugin-option cuda.attention=f32_tiles, and where math/attention_path.hpp
// says they apply and their shared memory fits the device's block.
bool use_mma(const CudaDevice& device, const Attn& a, tdm_dtype dt) {
  if (!device.attention_mma() || math::mma_attention_declines(dt == TDM_BF16 || dt == TDM_F16, a.D, a.E,
                                                              a.dropout, device.compute_major()))
    return false;
  const size_t limit = smem_limit(device);
  if (mma_attention_smem(a.D, a.E) > limit) return false;
  allow_mma_attention_smem(static_cast<int>(limit));
  return true;
}

std::unique_ptr<Kernel> prepare_attention(CudaDevice& device, const OpView& v, size_t&) {
  Check c(v);
  tdm_dtype dt;
  AttentionOperands operands;
  const Attn a = check_operands(c, 0, 3, dt, operands);
  const unsigned blocks = grid_of(c, a.B * a.H, a.T, kSide * kFwdR);
  const size_t smem = forward_smem(a.D, a.E);
  std::unique_ptr<Kernel> k;
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, float>) {
      if (use_mma(device, a, dt)) {
        k = make_kernel("attention:mma", [=](CudaStream& s, void* const* in, void* const* o, void*) {
          AttnIo<T> io = common_io<T>(operands, in, 0);
          io.out = static_cast<T*>(o[0]);
          io.lse_out = static_cast<float*>(o[1]);
          launch_mma_attention<T>(a, io, s.get());
        });
        return;
      }
    }
    reserve_smem(c, device, attention_kernel<T>, smem, forward_smem(kMaxHead, kMaxHead));
    k = make_kernel("attention:f32_tiles", [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (blocks == 0) return;
      AttnIo<T> io = common_io<T>(operands, in, 0);
      io.out = static_cast<T*>(o[0]);
      io.lse_out = static_cast<float*>(o[1]);
      attention_kernel<T><<<blocks, kAttnThreads, smem, s.get()>>>(a, io);
    });
  });
  return k;
}

std::unique_ptr<Kernel> prepare_attention_grad(CudaDevice& device, const OpView& v, size_t& workspace) {
  Check c(v);
  tdm_dtype dt;
  AttentionOperands operands;
  const Attn a = check_operands(c, 1, 6, dt, operands);
  const int64_t rows = a.B * a.H * a.T;
  workspace = static_cast<size_t>(rows) * sizeof(float);  // Δ
  const unsigned dq_blocks = grid_of(c, a.B * a.H, a.T, kSide * kDqR);
  const unsigned kv_blocks = grid_of(c, a.B * a.G, a.S, kSide * kKvR);
  const unsigned delta_blocks = static_cast<unsigned>(std::min<int64_t>((rows + 7) / 8, 65535 * 8));
  const size_t dq_bytes = dq_smem(a.D, a.E), kv_bytes = dkv_smem(a.D, a.E);
  std::unique_ptr<Kernel> k;
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, float>) {
      if (use_mma(device, a, dt)) {
        k = make_kernel("attention_grad:mma", [=](CudaStream& s, void* const* in, void* const* o, void* ws) {
          AttnIo<T> io = grad_io<T>(operands, in, o, ws);
          if (rows > 0)
            attention_delta_kernel<T>
                <<<delta_blocks, kThreads, 0, s.get()>>>(a, io.dout, io.o, io.delta, rows);
          launch_mma_attention_grad<T>(a, io, s.get());
        });
        return;
      }
    }
    reserve_smem(c, device, attention_dq_kernel<T>, dq_bytes, dq_smem(kMaxHead, kMaxHead));
    reserve_smem(c, device, attention_dkv_kernel<T>, kv_bytes, dkv_smem(kMaxHead, kMaxHead));
    k = make_kernel("attention_grad:f32_tiles", [=](CudaStream& s, void* const* in, void* const* o,
                                                    void* ws) {
      AttnIo<T> io = grad_io<T>(operands, in, o, ws);
      if (rows > 0)
        attention_delta_kernel<T><<<delta_blocks, kThreads, 0, s.get()>>>(a, io.dout, io.o, io.delta, rows);
      if (dq_blocks > 0) attention_dq_kernel<T><<<dq_blocks, kAttnThreads, dq_bytes, s.get()>>>(a, io);
      if (kv_blocks > 0) attention_dkv_kernel<T><<<kv_blocks, kAttnThreads, kv_bytes, s.get()>>>(a, io);
    });
  });
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("attention", prepare_attention);
  r.add("attention_grad", prepare_attention_grad);
});

}  // namespace

}  // namespace tandem::cuda
