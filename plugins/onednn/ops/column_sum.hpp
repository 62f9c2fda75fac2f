// oneDNN backend — the sum over the rows of a dense [rows, cols] tensor, own
// code shared by linear_grad_weight (dbias) and reduce_sum/reduce_mean over
// leading axes (a position embedding's gradient): oneDNN 2.6 has only its
// reference (ref:any) reduction for this shape, which cost more than the
// matmul beside it.
#ifndef TANDEM_ONEDNN_OPS_COLUMN_SUM_HPP
#define TANDEM_ONEDNN_OPS_COLUMN_SUM_HPP

#include <algorithm>

#include "common.hpp"

namespace tandem::onednn {

// y[j] = scale · sum over rows i of x[i, j] (T = float or bf16). Columns are
// split across threads in blocks of 32 with a loop of constant width, so the
// accumulators can stay in registers while the rows stream past (blocks of
// 256 of run-time width: the GPT benchmark's linear_grad_weight took 80 ms a
// step on 1 thread, now 74 ms); rows are added in order into f32
// accumulators, so the result is the same for any thread count.
template <class T>
void column_sum(const void* src, void* dst, int64_t rows, int64_t cols, float scale = 1.f) {
  const T* x = static_cast<const T*>(src);
  T* y = static_cast<T*>(dst);
  constexpr int64_t kBlock = 32;
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain && blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t j0 = b * kBlock, width = std::min(kBlock, cols - j0);
    float acc[kBlock] = {};
    if (width == kBlock) {
      for (int64_t i = 0; i < rows; ++i) {
        const T* row = x + i * cols + j0;
#pragma omp simd
        for (int64_t j = 0; j < kBlock; ++j) acc[j] += ld(row, j);
      }
    } else {
      for (int64_t i = 0; i < rows; ++i) {
        const T* row = x + i * cols + j0;
        for (int64_t j = 0; j < width; ++j) acc[j] += ld(row, j);
      }
    }
    for (int64_t j = 0; j < width; ++j) st(y, j0 + j, scale == 1.f ? acc[j] : acc[j] * scale);
  }
}

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_COLUMN_SUM_HPP
