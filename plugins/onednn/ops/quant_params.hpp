// oneDNN backend — the quantization grid shared by quantize, dequantize,
// fake_quant and the INT8 ops' scale checks (sdk/ops.md): the scale /
// zero_point / axis attributes per channel, and the one f32 rounding every
// backend must reproduce bit for bit.
#ifndef TANDEM_ONEDNN_OPS_QUANT_PARAMS_HPP
#define TANDEM_ONEDNN_OPS_QUANT_PARAMS_HPP

#include <algorithm>
#include <vector>

#include "common.hpp"

namespace tandem::onednn {

// A required float list attribute (Check::floats_attr), as f32.
std::vector<float> float_list(const Check& c, const char* name);

// Per-channel scale and zero point of each element: channel = (i / inner) % channels.
struct QuantParams {
  std::vector<float> scale;
  std::vector<int32_t> zero;
  int64_t channels = 1, inner = 1;
};

// The grid's attributes over `dims`, which the shape rule has checked
// (scales positive and finite, zero points in the integers' range, one
// entry or one per channel).
QuantParams quant_params(const Check& c, const Dims& dims);

// Runs body(lo, hi, scale, zero) over runs of elements that share a channel.
template <class Body>
inline void for_channels(const QuantParams& p, int64_t n, Body&& body) {
  if (p.channels == 1) {
    body(int64_t(0), n, p.scale[0], p.zero[0]);
    return;
  }
  const int64_t runs = n / p.inner;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t r = 0; r < runs; ++r) {
    const size_t ch = size_t(r % p.channels);
    body(r * p.inner, (r + 1) * p.inner, p.scale[ch], p.zero[ch]);
  }
}

// Round half to even without a libm call: adding and subtracting 1.5·2^23
// leaves v rounded to an integer in the default (nearest-even) mode, exact
// for |v| <= 2^22. The build targets baseline x86-64, where nearbyintf is a
// call per element that cost more than the INT8 matmul beside it; this form
// vectorises with SSE2.
inline float round_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 · 2^23
  return (v + kMagic) - kMagic;
}

// round_half_even(x / s) + z, clamped; NaN -> z (as the reference backend).
// x / s is clamped first to one step beyond the range (then saturating
// anyway), which keeps it within round_even's exact range.
inline int32_t quantize_one(float x, float s, int32_t z, float lo, float hi) {
  const float zf = float(z);
  const float v = std::min(std::max(x / s, lo - zf - 1.f), hi - zf + 1.f);  // NaN stays NaN
  float q = std::min(std::max(round_even(v) + zf, lo), hi);
  q = v != v ? zf : q;
  return int32_t(q);
}

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_QUANT_PARAMS_HPP
