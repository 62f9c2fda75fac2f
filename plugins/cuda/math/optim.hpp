// CUDA backend — optimizer updates per element, in f32, as the catalog and
// the reference define them (PyTorch's SGD and AdamW). Hyperparameters are
// rounded to f32 once on the host; AdamW's bias corrections are computed in
// double (as PyTorch does on the host) and then rounded.
//
// sgd:   g = grad + wd·p; with a momentum buffer: buf = momentum·buf +
//        (1-dampening)·g, g = nesterov ? g + momentum·buf : buf;  p -= lr·g
// adamw: p *= 1 - lr·wd;  m = b1·m + (1-b1)·g;  v = b2·v + (1-b2)·g²;
//        p -= lr · (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps),  t >= 1
#ifndef TANDEM_CUDA_MATH_OPTIM_HPP
#define TANDEM_CUDA_MATH_OPTIM_HPP

#include <cmath>

#include "math/common.hpp"

namespace tandem::cuda::math {

struct SgdParams {
  float momentum;
  float one_minus_dampening;
  float weight_decay;
  bool nesterov;
};

inline SgdParams sgd_params(double momentum, double dampening, double wd, bool nesterov) {
  return SgdParams{static_cast<float>(momentum), static_cast<float>(1.0 - dampening), static_cast<float>(wd),
                   nesterov};
}

// Updates param and, when buf != nullptr, *buf.
TDM_HD inline void sgd_step(const SgdParams& s, float lr, float& param, float grad, float* buf) {
  float g = grad + s.weight_decay * param;
  if (buf != nullptr) {
    const float b = s.momentum * (*buf) + s.one_minus_dampening * g;
    *buf = b;
    g = s.nesterov ? g + s.momentum * b : b;
  }
  param -= lr * g;
}

struct AdamwParams {
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float epsilon;
  float weight_decay;
  double beta1_d, beta2_d;  // for the bias corrections
};

inline AdamwParams adamw_params(double b1, double b2, double eps, double wd) {
  return AdamwParams{static_cast<float>(b1),
                     static_cast<float>(1.0 - b1),
                     static_cast<float>(b2),
                     static_cast<float>(1.0 - b2),
                     static_cast<float>(eps),
                     static_cast<float>(wd),
                     b1,
                     b2};
}

struct BiasCorrection {
  float c1, c2;  // 1 - beta^step, rounded from double
};
TDM_HD inline BiasCorrection bias_correction(const AdamwParams& a, int step) {
  return BiasCorrection{static_cast<float>(1.0 - pow(a.beta1_d, static_cast<double>(step))),
                        static_cast<float>(1.0 - pow(a.beta2_d, static_cast<double>(step)))};
}

TDM_HD inline void adamw_step(const AdamwParams& a, const BiasCorrection& bc, float lr, float& param,
                              float grad, float& m, float& v) {
  param *= 1.0f - lr * a.weight_decay;
  m = a.beta1 * m + a.one_minus_beta1 * grad;
  v = a.beta2 * v + a.one_minus_beta2 * grad * grad;
  param -= lr * (m / bc.c1) / (sqrtf(v / bc.c2) + a.epsilon);
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_OPTIM_HPP
