// CUDA backend — rotary position embedding per pair (sdk/ops.md, "rope").
// Element i < D/2 of a row at position p pairs with element i + D/2 and
// turns by θ_i = p·f_i, f_i = base^(−2i/D) or its llama3 scaling
// (tandem/rope_frequency.hpp). In f32, p·freq alone is off by about
// p·6e-8 rad, far too much at long contexts, so the angle is formed and
// reduced to [−π, π] in double; only the reduced angle goes to f32
// sin/cos, and the part of it that f32 cannot hold (< 1.2e-7 rad) is put
// back by a first-order correction, so the angle error stays near 1e-16·p.
#ifndef TANDEM_CUDA_MATH_ROPE_HPP
#define TANDEM_CUDA_MATH_ROPE_HPP

#include <cmath>
#include <cstdint>

#include "math/common.hpp"
#include "tandem/rope_frequency.hpp"

namespace tandem::cuda::math {

using tandem::RopeFrequency;

// The angle of pair i of `half` at `position`: the SDK's frequency (with
// llama3 scaling when the op asks for it), all in double.
TDM_HD inline double rope_angle(int64_t position, int64_t i, int64_t half, const RopeFrequency& frequency) {
  return static_cast<double>(position) * frequency(i, half);
}

// cos θ and sin θ in f32 for an angle given in double.
TDM_HD inline void rope_cos_sin(double theta, float& c, float& s) {
  constexpr double kTwoPi = 6.283185307179586;
  const double r = theta - rint(theta / kTwoPi) * kTwoPi;
  const float rf = static_cast<float>(r);
  const float lost = static_cast<float>(r - static_cast<double>(rf));
  const float cf = cosf(rf), sf = sinf(rf);
  // cos(rf + δ) ≈ cos rf − δ·sin rf, sin(rf + δ) ≈ sin rf + δ·cos rf; δ² < 1.5e-14.
  c = cf - lost * sf;
  s = sf + lost * cf;
}

// The rotation of one pair (lo = x_i, hi = x_{i+D/2}) by the angle whose
// cosine and sine are c and s; rope_grad passes −s (the transpose).
TDM_HD inline void rope_rotate(float lo, float hi, float c, float s, float& y_lo, float& y_hi) {
  y_lo = lo * c - hi * s;
  y_hi = hi * c + lo * s;
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_ROPE_HPP
