// CUDA backend — the tile building blocks of ops/attention.cu: a block of
// 256 threads seen as a 16 x 16 grid (ty, tx), where a thread owns the tile
// rows ty + 16·r and the tile columns tx + 16·c. A tile row thus lives in one
// half-warp (row maxima and sums are shuffles), and a thread keeps 8 head-dim
// columns of 16 of each of its rows in registers: head dims up to 128.
// Tiles sit in shared memory as f32, rows padded by one float where a half-
// warp reads down a column, so its 16 lanes hit 16 different banks.
#ifndef TANDEM_CUDA_OPS_ATTENTION_TILES_CUH
#define TANDEM_CUDA_OPS_ATTENTION_TILES_CUH

#include "ops/kernels.cuh"

namespace tandem::cuda::tiles {

constexpr int kSide = 16;  // the 16 x 16 thread grid
constexpr int kAttnThreads = kSide * kSide;
constexpr int kMaxHead = 128;
constexpr int kHeadCols = kMaxHead / kSide;  // head-dim columns per thread

// The rows of a tile of `tile` that lie before the end (`left` of them remain).
__device__ __forceinline__ int tile_len(int tile, int64_t left) {
  return left < tile ? static_cast<int>(left) : tile;
}

__device__ __forceinline__ int tid_y() {
  return threadIdx.x / kSide;
}
__device__ __forceinline__ int tid_x() {
  return threadIdx.x % kSide;
}

// Lanes xor 8, 4, 2, 1 stay inside the half-warp that holds a tile row.
__device__ __forceinline__ float row_max(float v) {
  for (int o = kSide / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float row_sum(float v) {
  for (int o = kSide / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Rows [r0, r0 + n) of a matrix of `cols` columns whose rows are `ld_src`
// apart (a head's rows: the width, or heads x width with the heads after
// the positions), times `mul`, into dst[r·stride + c] for r < n_pad (zeros
// past n: a partial tile adds nothing and reads no NaN garbage).
template <class T>
__device__ void load_rows(const T* src, int64_t ld_src, int64_t r0, int n, int n_pad, int cols, float mul,
                          float* dst, int stride) {
  for (int i = threadIdx.x; i < n_pad * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols;
    dst[r * stride + c] = r < n ? ld(src, (r0 + r) * ld_src + c) * mul : 0.0f;
  }
}

// The same, stored transposed: dst[c·stride + r].
template <class T>
__device__ void load_rows_t(const T* src, int64_t ld_src, int64_t r0, int n, int n_pad, int cols, float mul,
                            float* dst, int stride) {
  for (int i = threadIdx.x; i < n_pad * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols;
    dst[c * stride + r] = r < n ? ld(src, (r0 + r) * ld_src + c) * mul : 0.0f;
  }
}

// acc[r][c] = Σ_{k<K} a[(ty + 16r)·lda + k] · bt[k·ldb + tx + 16c].
template <int R, int C>
__device__ __forceinline__ void tile_dot(const float* a, int lda, const float* bt, int ldb, int K,
                                         float (&acc)[R][C]) {
  const int ty = tid_y(), tx = tid_x();
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < C; ++c) acc[r][c] = 0.0f;
#pragma unroll 4
  for (int k = 0; k < K; ++k) {
    float av[R], bv[C];
#pragma unroll
    for (int r = 0; r < R; ++r) av[r] = a[(ty + kSide * r) * lda + k];
#pragma unroll
    for (int c = 0; c < C; ++c) bv[c] = bt[k * ldb + tx + kSide * c];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < C; ++c) acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
  }
}

// acc[r][c] += Σ_{j<J} p[(ty + 16r)·ldp + j] · m[j·mj + col·mc] for the
// head-dim columns col = tx + 16c below `cols`.
template <int R>
__device__ __forceinline__ void tile_accumulate(const float* p, int ldp, int J, const float* m, int mj,
                                                int mc, int cols, float (&acc)[R][kHeadCols]) {
  const int ty = tid_y(), tx = tid_x();
  for (int j = 0; j < J; ++j) {
    float pv[R];
#pragma unroll
    for (int r = 0; r < R; ++r) pv[r] = p[(ty + kSide * r) * ldp + j];
#pragma unroll
    for (int c = 0; c < kHeadCols; ++c) {
      const int col = tx + kSide * c;
      if (col < cols) {
        const float mv = m[j * mj + col * mc];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r][c] = fmaf(pv[r], mv, acc[r][c]);
      }
    }
  }
}

template <int R>
__device__ __forceinline__ void zero(float (&acc)[R][kHeadCols]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < kHeadCols; ++c) acc[r][c] = 0.0f;
}

}  // namespace tandem::cuda::tiles

#endif  // TANDEM_CUDA_OPS_ATTENTION_TILES_CUH
