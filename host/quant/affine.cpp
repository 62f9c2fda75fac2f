#include "quant/affine.hpp"

#include <algorithm>
#include <cmath>

namespace tandem::host::quant {

AffineU8 u8_params(Range r) {
  const double lo = std::min(r.lo, 0.0), hi = std::max(r.hi, 0.0);
  if (!(hi > lo) || !std::isfinite(hi - lo)) return {};
  // Rounded to f32 here, because the graph carries f32 attributes: the zero
  // point must be computed from the scale the kernels will actually use.
  const float scale = float((hi - lo) / 255.0);
  if (!(scale > 0)) return {};
  const double z = std::nearbyint(-lo / double(scale));
  return {double(scale), int64_t(std::clamp(z, 0.0, 255.0))};
}

QuantizedWeights quantize_weights(std::span<const float> w, int64_t rows, int64_t cols, bool per_channel,
                                  int qmax) {
  const float top = float(qmax);
  QuantizedWeights q;
  q.values.resize(w.size());
  const int64_t groups = per_channel ? rows : 1, per_group = per_channel ? cols : rows * cols;
  for (int64_t g = 0; g < groups; ++g) {
    float amax = 0;
    for (int64_t i = 0; i < per_group; ++i) amax = std::max(amax, std::fabs(w[size_t(g * per_group + i)]));
    // An all-zero row keeps a harmless positive scale (the kernels require one).
    const float scale = amax > 0 ? amax / top : 1.0f;
    q.scales.push_back(scale);
    for (int64_t i = 0; i < per_group; ++i) {
      const size_t at = size_t(g * per_group + i);
      const float v = std::nearbyint(w[at] / scale);
      q.values[at] = int8_t(std::clamp(v, -top, top));
    }
  }
  return q;
}

}  // namespace tandem::host::quant
