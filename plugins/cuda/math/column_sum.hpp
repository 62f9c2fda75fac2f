// CUDA backend — the schedule of the column sums behind the parameter and
// bias gradients (layer_norm's dgamma and dbeta, rms_norm's dgamma, the
// dbias of linear and conv2d): out[s][j] = Σ_r term_s(r, j) over the rows of
// a [rows, cols] matrix, in f32, with no atomics.
//
// Two stages (ops/column_sum.cuh). Stage 1: a grid of (column tile, row
// chunk) blocks of kColumnTile x kRowLanes threads; the 32 threads of a warp
// take 32 consecutive columns of one row, so every load is coalesced along
// the row. Thread row `lane` sums rows begin + lane, begin + lane +
// kRowLanes, ... of its chunk in increasing order, then lane 0 folds the
// kRowLanes sums in lane order into the chunk's partial. Stage 2 folds the
// chunk partials of each column in chunk order. The plan depends on rows and
// cols only — not on the GPU — so every GPU and every run adds the same
// numbers in the same order: the same bits. column_sums() below is that
// order on the CPU (tests/cuda/test_reductions.cpp checks it against a
// simulated grid, and the GPU tests check the kernels against it bit for
// bit).
//
// A term adds row r's contribution to its K accumulators through fmaf where
// it multiplies and adds, so neither nvcc nor g++ can contract it
// differently: the CPU computes the GPU's bits, not just its order.
#ifndef TANDEM_CUDA_MATH_COLUMN_SUM_HPP
#define TANDEM_CUDA_MATH_COLUMN_SUM_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "math/common.hpp"

namespace tandem::cuda::math {

// Stage 1's block: one warp wide along the columns, kRowLanes warps deep.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 8;
constexpr int kColumnSumThreads = kColumnTile * kRowLanes;
// Stage 1 aims at about this many blocks: two waves of 256-thread blocks
// on the largest GPUs (an H100 holds ~1000 at once), so the loads in flight
// cover the memory latency.
constexpr int64_t kColumnSumBlocks = 2048;
// No chunk is split below this many rows (8 per thread row): the partials
// stage 2 reads back stay under 1/64 of what stage 1 reads.
constexpr int64_t kMinChunkRows = 64;

struct ColumnSumPlan {
  int64_t rows = 0, cols = 0;
  int64_t chunks = 1;      // row chunks: stage 1's grid y, the terms stage 2 folds per column
  int64_t chunk_rows = 0;  // rows per chunk, a multiple of kRowLanes; the last chunk may be shorter

  TDM_HD int64_t tiles() const { return (cols + kColumnTile - 1) / kColumnTile; }
  TDM_HD int64_t begin(int64_t chunk) const { return chunk * chunk_rows; }
  TDM_HD int64_t end(int64_t chunk) const {
    const int64_t e = (chunk + 1) * chunk_rows;
    return e < rows ? e : rows;
  }
  // f32 partials of one sum (stage 1's output), [chunks, cols].
  TDM_HD int64_t partials() const { return chunks * cols; }
};

// How stage 1 splits the rows. A pure function of the shape, so the order
// of every sum is too.
inline ColumnSumPlan column_sum_plan(int64_t rows, int64_t cols) {
  ColumnSumPlan p;
  p.rows = rows < 0 ? 0 : rows;
  p.cols = cols < 0 ? 0 : cols;
  const int64_t tiles = p.tiles() > 0 ? p.tiles() : 1;
  int64_t chunks = (kColumnSumBlocks + tiles - 1) / tiles;
  const int64_t most = p.rows / kMinChunkRows;
  if (chunks > most) chunks = most;
  if (chunks < 1) chunks = 1;
  const Chunks cut = whole_chunks(p.rows, chunks, kRowLanes);
  p.chunk_rows = cut.length;
  p.chunks = cut.count;
  return p;
}

// What thread row `lane` of chunk `chunk` adds up for column j: its rows in
// increasing order, each accumulator starting from +0.
template <int K, class Term>
TDM_HD inline void lane_sums(const ColumnSumPlan& p, int64_t chunk, int lane, int64_t j, const Term& term,
                             float (&acc)[K]) {
  for (int s = 0; s < K; ++s) acc[s] = 0.0f;
  const int64_t end = p.end(chunk);
#if defined(__CUDA_ARCH__)
#pragma unroll 4
#endif
  for (int64_t r = p.begin(chunk) + lane; r < end; r += kRowLanes) term(acc, r, j);
}

// first[0] + first[stride] + ... + first[(n - 1)·stride], left to right:
// how lane sums become a chunk partial and chunk partials a column's sum.
TDM_HD inline float fold(const float* first, int64_t n, int64_t stride) {
  float s = first[0];
  for (int64_t k = 1; k < n; ++k) s += first[k * stride];
  return s;
}

// ---- terms -----------------------------------------------------------------

// One sum: the column sum of a [rows, cols] matrix (linear's dbias, conv2d's
// dbias over per-(n, channel) sums).
template <class T>
struct PlainTerm {
  static constexpr int kSums = 1;
  const T* v;
  int64_t cols;
  TDM_HD void operator()(float (&acc)[1], int64_t r, int64_t j) const { acc[0] += to_float(v[r * cols + j]); }
};

// layer_norm_grad: dgamma[j] = Σ_r dy·(x − mean_r)·rstd_r, dbeta[j] = Σ_r dy.
template <class T>
struct LayerNormParamTerm {
  static constexpr int kSums = 2;
  const T* dy;
  const T* x;
  const float* mean;
  const float* rstd;
  int64_t cols;
  TDM_HD void operator()(float (&acc)[2], int64_t r, int64_t j) const {
    const int64_t i = r * cols + j;
    const float d = to_float(dy[i]);
    acc[0] = fmaf(d, (to_float(x[i]) - mean[r]) * rstd[r], acc[0]);
    acc[1] += d;
  }
};

// rms_norm_grad: dgamma[j] = Σ_r dy·x·rstd_r.
template <class T>
struct RmsNormParamTerm {
  static constexpr int kSums = 1;
  const T* dy;
  const T* x;
  const float* rstd;
  int64_t cols;
  TDM_HD void operator()(float (&acc)[1], int64_t r, int64_t j) const {
    const int64_t i = r * cols + j;
    acc[0] = fmaf(to_float(dy[i]), to_float(x[i]) * rstd[r], acc[0]);
  }
};

// ---- the order on the CPU ----------------------------------------------------

// out[s·cols + j] = the K sums of every column, added exactly as the two
// kernels add them.
template <int K, class Term>
void column_sums(const ColumnSumPlan& p, const Term& term, float* out) {
  std::vector<float> partials(static_cast<size_t>(K * p.chunks));
  for (int64_t j = 0; j < p.cols; ++j) {
    for (int64_t k = 0; k < p.chunks; ++k) {
      float lanes[K][kRowLanes];
      for (int lane = 0; lane < kRowLanes; ++lane) {
        float acc[K];
        lane_sums<K>(p, k, lane, j, term, acc);
        for (int s = 0; s < K; ++s) lanes[s][lane] = acc[s];
      }
      for (int s = 0; s < K; ++s)
        partials[static_cast<size_t>(s * p.chunks + k)] = fold(lanes[s], kRowLanes, 1);
    }
    for (int s = 0; s < K; ++s)
      out[s * p.cols + j] = fold(&partials[static_cast<size_t>(s * p.chunks)], p.chunks, 1);
  }
}

// ---- channel sums: conv2d's and linear's dbias ----------------------------

// dbias[c] = Σ_{o,i} dy[o, c, i] over [outer, channels, inner]. With inner
// = 1 it is the column sum of [outer, channels]. Otherwise a warp first
// sums each contiguous run dy[o, c, :] (warp_row_sum) into an f32
// [outer, channels] matrix in the workspace, whose column sum follows.
struct ChannelSumPlan {
  int64_t outer = 0, channels = 0, inner = 1;
  ColumnSumPlan columns;
  // f32 sums of the runs, before the partials; none when inner = 1.
  int64_t row_sums() const { return inner == 1 ? 0 : outer * channels; }
  size_t workspace_bytes() const {
    return channels == 0 ? 0 : static_cast<size_t>(row_sums() + columns.partials()) * sizeof(float);
  }
};

inline ChannelSumPlan channel_sum_plan(int64_t outer, int64_t channels, int64_t inner) {
  ChannelSumPlan p{outer, channels, inner, column_sum_plan(outer, channels)};
  return p;
}

constexpr int kWarp = 32;

// What lane `lane` of the warp summing run[0, n) adds: run[lane],
// run[lane + 32], ... in order, from +0.
template <class T>
TDM_HD inline float warp_lane_sum(const T* run, int64_t n, int lane) {
  float acc = 0.0f;
  for (int64_t i = lane; i < n; i += kWarp) acc += to_float(run[i]);
  return acc;
}

// The warp's sum of run[0, n): lane sums folded as a butterfly, each lane
// adding the lane 16, 8, 4, 2, then 1 away (what __shfl_xor_sync does; the
// two lanes of a pair add the same two numbers, so every lane ends with the
// same bits).
template <class T>
float warp_row_sum(const T* run, int64_t n) {
  float v[kWarp], w[kWarp];
  for (int lane = 0; lane < kWarp; ++lane) v[lane] = warp_lane_sum(run, n, lane);
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    for (int lane = 0; lane < kWarp; ++lane) w[lane] = v[lane] + v[lane ^ o];
    for (int lane = 0; lane < kWarp; ++lane) v[lane] = w[lane];
  }
  return v[0];
}

// out[c] = dbias[c] before rounding to the output dtype, added exactly as
// launch_channel_sums adds it.
template <class T>
void channel_sums(const ChannelSumPlan& p, const T* dy, float* out) {
  if (p.inner == 1) {
    column_sums<1>(p.columns, PlainTerm<T>{dy, p.channels}, out);
    return;
  }
  std::vector<float> runs(static_cast<size_t>(p.row_sums()));
  for (int64_t w = 0; w < p.row_sums(); ++w) runs[size_t(w)] = warp_row_sum(dy + w * p.inner, p.inner);
  column_sums<1>(p.columns, PlainTerm<float>{runs.data(), p.channels}, out);
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_COLUMN_SUM_HPP
