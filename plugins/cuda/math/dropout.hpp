// CUDA backend — the catalog's counter-based dropout mask (sdk/ops.md,
// "dropout"), bit-identical to the reference: element i (flat, 0-based) is
// kept iff u(seed, i) >= p, where u is the top 24 bits of SplitMix64's
// finaliser applied to seed + (i+1)·0x9E3779B97F4A7C15 (mod 2^64), scaled
// to [0, 1). Kept elements are divided by (1-p), rounded to f32.
//
// On the GPU the comparison is done on integers: u >= p  <=>  k >= ceil(p·2^24)
// with k the 24-bit value (p·2^24 is exact in double), so no double math
// runs per element.
#ifndef TANDEM_CUDA_MATH_DROPOUT_HPP
#define TANDEM_CUDA_MATH_DROPOUT_HPP

#include <cmath>
#include <cstdint>

#include "math/common.hpp"

namespace tandem::cuda::math {

TDM_HD inline uint64_t splitmix64(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The 24-bit draw k; u = k · 2^-24.
TDM_HD inline uint32_t dropout_draw(uint64_t seed, uint64_t i) {
  return static_cast<uint32_t>(splitmix64(seed, i) >> 40);
}

// Smallest k that is kept: ceil(p · 2^24), in [0, 2^24].
inline uint32_t dropout_threshold(double p) {
  return static_cast<uint32_t>(std::ceil(p * 16777216.0));
}

TDM_HD inline bool dropout_keep(uint64_t seed, uint64_t i, uint32_t threshold) {
  return dropout_draw(seed, i) >= threshold;
}

// scale_den = (float)(1 - p), computed in double on the host.
TDM_HD inline float dropout_apply(float x, bool keep, float scale_den) {
  return keep ? x / scale_den : 0.0f;
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_DROPOUT_HPP
