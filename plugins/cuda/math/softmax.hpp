// CUDA backend — the per-row math of softmax cross entropy (PyTorch's
// CrossEntropyLoss with label smoothing ε), given the row's statistics so
// the kernel only has to reduce: the row maximum m, lse = log Σ exp(x-m),
// and Σ x. With log p_c = x_c - m - lse:
//   loss_i = (1-ε)·(m + lse - x_y) + ε·(m + lse - Σx / C)
//   dlogits_c = s·(exp(x_c - m - lse) - (1-ε)·[c == y] - ε/C)
// with s = dloss (sum) or dloss / count of non-ignored rows (mean).
#ifndef TANDEM_CUDA_MATH_SOFTMAX_HPP
#define TANDEM_CUDA_MATH_SOFTMAX_HPP

#include <cmath>

#include "math/common.hpp"

namespace tandem::cuda::math {

TDM_HD inline float ce_row_loss(float x_label, float max, float lse, float row_sum, int classes, float eps) {
  const float log_z = max + lse;
  return (1.0f - eps) * (log_z - x_label) + eps * (log_z - row_sum / static_cast<float>(classes));
}

TDM_HD inline float ce_grad(float x, float max, float lse, bool is_label, int classes, float eps,
                            float scale) {
  const float p = expf(x - max - lse);
  return scale * (p - (is_label ? 1.0f - eps : 0.0f) - eps / static_cast<float>(classes));
}

// softmax_grad:     dx = y·(dy - Σ dy·y)
TDM_HD inline float softmax_grad(float dy, float y, float dot) {
  return y * (dy - dot);
}
// log_softmax_grad: dx = dy - exp(y)·Σ dy
TDM_HD inline float log_softmax_grad(float dy, float y, float sum_dy) {
  return dy - expf(y) * sum_dy;
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_SOFTMAX_HPP
