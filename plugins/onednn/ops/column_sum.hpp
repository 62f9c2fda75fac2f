// oneDNN backend — the sum over the rows of a dense [rows, cols] tensor, own
// code shared by linear_grad_weight (dbias) and reduce_sum/reduce_mean over
// leading axes (a position embedding's gradient): oneDNN 2.6 has only its
// reference (ref:any) reduction for this shape, which cost more than the
// matmul beside it.
#ifndef TANDEM_ONEDNN_OPS_COLUMN_SUM_HPP
#define TANDEM_ONEDNN_OPS_COLUMN_SUM_HPP

#include <algorithm>

#include <omp.h>

#include "common.hpp"

namespace tandem::onednn {

// y[j] = scale · sum over rows i of x[i, j] (T = float or bf16; Out = T, or
// float for a bf16 sum kept in f32). Each task
// owns a range of columns and streams every row's slice of it into f32
// accumulators that stay in L1, so x is read once, row after row, as it lies
// in memory. Column blocks of 32, each walking down all the rows, read it
// in 32-float strips a row apart: the GPT benchmark's bias sums of
// 4096 x 192 and 4096 x 768 took 0.18 and 1.08 ms that way against 0.11 and
// 0.51 streamed (timed alone, best of 20, the matrix warm as after the
// GEMM; by those timings, about 3.7 ms of a 1-thread step with 4 blocks
// of five narrow and one wide bias). Every column is still summed by one
// thread in row order, so the result is the same bits for any thread count.
template <class T, class Out = T>
void column_sum(const void* src, void* dst, int64_t rows, int64_t cols, float scale = 1.f) {
  const T* x = static_cast<const T*>(src);
  Out* y = static_cast<Out*>(dst);
  // A range per thread, in whole cache lines, and at most 1024 columns so
  // its accumulators (4 KiB) stay in L1 beside the rows streaming past.
  constexpr int64_t kLine = 16, kWidest = 1024;
  const bool parallel = rows * cols > kParallelGrain;
  const int64_t threads = parallel ? omp_get_max_threads() : 1;
  const int64_t width = std::clamp((cols + threads * kLine - 1) / (threads * kLine) * kLine, kLine, kWidest);
  const int64_t ranges = (cols + width - 1) / width;
#pragma omp parallel for schedule(static) if (parallel && ranges > 1)
  for (int64_t r = 0; r < ranges; ++r) {
    const int64_t j0 = r * width, n = std::min(width, cols - j0);
    float acc[kWidest];
    std::fill(acc, acc + n, 0.f);
    // Four rows a pass, added one after another as the row-at-a-time loop
    // would (the same bits), with a quarter of its accumulator loads and stores.
    int64_t i = 0;
    for (; i + 4 <= rows; i += 4) {
      const T* row = x + i * cols + j0;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        acc[j] =
            (((acc[j] + ld(row, j)) + ld(row, cols + j)) + ld(row, 2 * cols + j)) + ld(row, 3 * cols + j);
    }
    for (; i < rows; ++i) {
      const T* row = x + i * cols + j0;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) acc[j] += ld(row, j);
    }
    for (int64_t j = 0; j < n; ++j) st(y, j0 + j, scale == 1.f ? acc[j] : acc[j] * scale);
  }
}

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_COLUMN_SUM_HPP
