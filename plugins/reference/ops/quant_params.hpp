// Reference backend — the quantization grid shared by quantize, dequantize
// and fake_quant (sdk/ops.md): the scale / zero_point / axis attributes
// expanded to one entry per channel, and the one rounding every backend
// must reproduce bit for bit.
#ifndef TANDEM_REFERENCE_OPS_QUANT_PARAMS_HPP
#define TANDEM_REFERENCE_OPS_QUANT_PARAMS_HPP

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common.hpp"

namespace tandem::reference {

// The scale / zero_point / axis attributes shared by the quantization ops,
// expanded to one entry per channel.
struct QuantParams {
  std::vector<double> scale;  // per channel (size 1 for per-tensor)
  std::vector<int64_t> zero;  // same size as scale
  int64_t channels = 1;       // dims[axis], or 1
  int64_t inner = 1;          // product of the dims after axis
  int64_t channel_of(int64_t flat) const { return channels == 1 ? 0 : (flat / inner) % channels; }
};

// The grid's attributes over `dims`, which the shape rule has checked
// (scales positive and finite in f32, zero points in the integers' range,
// one entry or one per channel).
QuantParams quant_params(const Check& c, const Dims& dims);

// The range of an integer dtype (u8, s8, else s32).
inline void int_range(tdm_dtype dt, int64_t& lo, int64_t& hi) {
  lo = dt == TDM_U8 ? 0 : dt == TDM_S8 ? -128 : std::numeric_limits<int32_t>::min();
  hi = dt == TDM_U8 ? 255 : dt == TDM_S8 ? 127 : std::numeric_limits<int32_t>::max();
}

// round_half_even(x / s) + z clamped to [lo, hi] in the compute type T;
// NaN -> z. The clamp happens in T: beyond 2^24 the sum may round, but it is
// then far outside any 8-bit range and saturates either way.
template <class T>
inline int64_t quantize_one(T x, T s, int64_t z, int64_t lo, int64_t hi) {
  if (std::isnan(x)) return z;
  const T v = std::nearbyint(x / s) + T(z);
  if (v <= T(lo)) return lo;
  if (v >= T(hi)) return hi;
  return int64_t(v);
}

}  // namespace tandem::reference

#endif  // TANDEM_REFERENCE_OPS_QUANT_PARAMS_HPP
