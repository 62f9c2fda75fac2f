// CUDA backend — the arithmetic of embedding_grad's deterministic
// schedule (ops/embedding_grad.cuh): every position gets a key, its table
// row (or a sentinel past every row when it adds nothing: out of range,
// outside the vocabulary slice, the padding row); a stable radix sort of
// (key, position) pairs groups the positions of each row in increasing
// position order; then dtable[v, j] is the sum of dy[position, j] over v's
// run, from +0 in position order — the same additions, in the same order, as
// the naive loop `dtable[row] += dy[i]` over i. So the bits depend neither
// on the GPU nor on the run, and tests/cuda can rebuild them on the CPU.
#ifndef TANDEM_CUDA_MATH_EMBEDDING_GRAD_HPP
#define TANDEM_CUDA_MATH_EMBEDDING_GRAD_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "math/common.hpp"

namespace tandem::cuda::math {

// Past every row a key can name: rows come from s32 indices, so at most
// 2^31 of them are reachable whatever V is.
inline uint32_t embedding_sentinel(int64_t V) {
  return V < (int64_t(1) << 31) ? static_cast<uint32_t>(V) : uint32_t(1) << 31;
}

// The low bits the sort needs to order keys up to `sentinel`.
inline int embedding_key_bits(uint32_t sentinel) {
  int bits = 1;
  while (bits < 32 && (uint64_t(1) << bits) <= sentinel) ++bits;
  return bits;
}

// Position i's key: its table row, or `sentinel` when it adds nothing.
// `shift` is vocab_start (0 for a whole table), `padding` counts in the
// table's own rows (< 0: none).
TDM_HD inline uint32_t embedding_key(int32_t index, int64_t shift, int64_t V, int64_t padding,
                                     uint32_t sentinel) {
  const int64_t row = int64_t(index) - shift;
  return row < 0 || row >= V || row == padding ? sentinel : static_cast<uint32_t>(row);
}

// The first of keys[0, n) (sorted) that is not below v.
TDM_HD inline int64_t key_lower_bound(const uint32_t* keys, int64_t n, uint32_t v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The end of v's run when it starts at `begin` (sorted keys): the first
// key past it that is not v.
TDM_HD inline int64_t run_end(const uint32_t* keys, int64_t n, int64_t begin, uint32_t v) {
  while (begin < n && keys[begin] == v) ++begin;
  return begin;
}

// dtable[v, j]: dy[positions[t], j] over the run [begin, end) of v's sorted
// positions, left to right from +0.
TDM_HD inline float run_sum(const int32_t* positions, int64_t begin, int64_t end, const float* dy, int64_t D,
                            int64_t j) {
  float acc = 0.0f;
  for (int64_t t = begin; t < end; ++t) acc += dy[int64_t(positions[t]) * D + j];
  return acc;
}

// Table rows per block of the kernel that writes dtable: about 2048 blocks
// (two waves on the largest GPUs), so each block's one binary search is
// spread over many rows' writes. Which block writes a row changes nothing
// in how the row is summed.
inline int64_t embedding_rows_per_block(int64_t V) {
  const int64_t rows = (V + 2047) / 2048;
  return rows > 0 ? rows : 1;
}

// Where the kernel's workspace keeps the sort's arrays and CUB's scratch,
// each at a 256-byte boundary.
struct EmbeddingGradLayout {
  size_t keys_in = 0, keys_out = 0, positions_in = 0, positions_out = 0, sort = 0, bytes = 0;
};

inline EmbeddingGradLayout embedding_grad_layout(int64_t n, size_t sort_bytes) {
  const auto round = [](size_t b) { return (b + 255) / 256 * 256; };
  const size_t array = round(static_cast<size_t>(n) * 4);
  EmbeddingGradLayout l;
  l.keys_out = l.keys_in + array;
  l.positions_in = l.keys_out + array;
  l.positions_out = l.positions_in + array;
  l.sort = l.positions_out + array;
  l.bytes = l.sort + round(sort_bytes);
  return l;
}

// The whole schedule on the CPU: a stable sort by key, then the row groups
// walked and each row's run summed as the GPU does. dtable is [V, D].
inline void embedding_grad_sums(const int32_t* indices, int64_t n, const float* dy, int64_t V, int64_t D,
                                int64_t shift, int64_t padding, float* dtable) {
  const uint32_t sentinel = embedding_sentinel(V);
  std::vector<uint32_t> keys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) keys[size_t(i)] = embedding_key(indices[i], shift, V, padding, sentinel);
  std::vector<int32_t> positions(static_cast<size_t>(n));
  std::iota(positions.begin(), positions.end(), 0);
  std::stable_sort(positions.begin(), positions.end(),
                   [&](int32_t a, int32_t b) { return keys[size_t(a)] < keys[size_t(b)]; });
  std::vector<uint32_t> sorted(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) sorted[size_t(t)] = keys[size_t(positions[size_t(t)])];
  const int64_t group = embedding_rows_per_block(V);
  for (int64_t v0 = 0; v0 < V; v0 += group) {
    int64_t begin = v0 < int64_t(sentinel) ? key_lower_bound(sorted.data(), n, uint32_t(v0)) : n;
    for (int64_t v = v0; v < std::min(V, v0 + group); ++v) {
      const int64_t end = v < int64_t(sentinel) ? run_end(sorted.data(), n, begin, uint32_t(v)) : begin;
      for (int64_t j = 0; j < D; ++j) dtable[v * D + j] = run_sum(positions.data(), begin, end, dy, D, j);
      begin = end;
    }
  }
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_EMBEDDING_GRAD_HPP
