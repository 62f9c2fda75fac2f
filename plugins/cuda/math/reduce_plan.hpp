// CUDA backend — how reduce_sum and reduce_mean split their work
// (ops/reduce.cu). Each output element sums `count` elements of x. Where
// there are few outputs and many elements each (a whole-tensor sum: a
// gradient's norm for clipping, amp's overflow check), one block per output
// would leave the GPU idle, so each output's elements are cut into `splits`
// chunks of `chunk` consecutive indices. Stage 1: block (output, split)
// sums its chunk (thread t: indices t, t + kReduceThreads, ... in order,
// then a fixed tree over the block) into a partial. Stage 2: one block per
// output folds its partials in split order. The plan depends on the shape
// only, so every run adds in the same order: the same bits.
#ifndef TANDEM_CUDA_MATH_REDUCE_PLAN_HPP
#define TANDEM_CUDA_MATH_REDUCE_PLAN_HPP

#include <cstdint>

#include "math/common.hpp"

namespace tandem::cuda::math {

constexpr int kReduceThreads = 256;
// Stage 1 aims at about this many blocks in all (an H100 holds ~1000 at once).
constexpr int64_t kReduceBlocks = 1024;
// No chunk below this many elements (16 per thread): splitting smaller
// costs more in the second stage than it gains.
constexpr int64_t kMinReduceChunk = 16 * kReduceThreads;

struct ReducePlan {
  int64_t outputs = 0, count = 0;
  int64_t splits = 1;  // chunks per output: stage 1's grid y; 1: stage 1 writes the outputs
  int64_t chunk = 0;   // elements per chunk, a multiple of kReduceThreads; the last may be shorter

  TDM_HD int64_t begin(int64_t split) const { return split * chunk; }
  TDM_HD int64_t end(int64_t split) const {
    const int64_t e = (split + 1) * chunk;
    return e < count ? e : count;
  }
  // f32 partials stage 1 writes when it splits, [outputs, splits].
  TDM_HD int64_t partials() const { return splits > 1 ? outputs * splits : 0; }
};

inline ReducePlan reduce_plan(int64_t outputs, int64_t count) {
  ReducePlan p;
  p.outputs = outputs < 0 ? 0 : outputs;
  p.count = count < 0 ? 0 : count;
  const int64_t most_by_size = p.count / kMinReduceChunk;
  const int64_t most_by_grid = p.outputs > 0 ? kReduceBlocks / p.outputs : 1;
  int64_t splits = most_by_size < most_by_grid ? most_by_size : most_by_grid;
  if (splits < 1) splits = 1;
  const Chunks cut = whole_chunks(p.count, splits, kReduceThreads);
  p.chunk = cut.length;
  p.splits = cut.count;
  return p;
}

// The distance between consecutive reduced elements when the reduced axes
// (dims and strides of x, outermost first) collapse into one run of equal
// steps, as every reduction over trailing axes does (step 1) or over
// leading ones (step: the kept elements); 0 when they do not, and the
// kernel then walks the axes one by one.
TDM_HD inline int64_t collapsed_step(const int64_t* dims, const int64_t* strides, int rank) {
  if (rank == 0) return 1;
  for (int d = 0; d + 1 < rank; ++d)
    if (strides[d] != strides[d + 1] * dims[d + 1]) return 0;
  return strides[rank - 1];
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_REDUCE_PLAN_HPP
