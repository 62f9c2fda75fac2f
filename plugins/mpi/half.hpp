// MPI comm plugin — f16 and bf16 without MPI support for them.
//
// MPI 3.1 (Open MPI 4) has no 16-bit float types. A tdm f16/bf16 buffer
// travels as a committed contiguous 2-byte datatype, and SUM/MAX/MIN are
// user MPI_Ops that widen each pair of elements to f32, combine, and round
// back (round-to-nearest-even). No extra buffer, no extra traffic; the cost
// is one rounding per reduction step, the same as summing in the 16-bit type
// (see README.md, "Precision"). Header-only so the tests can check it.
#ifndef TANDEM_MPI_HALF_HPP
#define TANDEM_MPI_HALF_HPP

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tandem::mpi {

inline float bf16_to_f32(uint16_t h) noexcept {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t f32_to_bf16(float f) noexcept {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if (std::isnan(f)) return uint16_t((bits >> 16) | 0x40);  // stay a (quiet) NaN
  bits += 0x7fff + ((bits >> 16) & 1);                      // round to nearest even
  return uint16_t(bits >> 16);
}

inline float f16_to_f32(uint16_t h) noexcept {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);  // normal: rebias 15 -> 127
  } else {
    const float v = std::ldexp(float(man), -24);  // zero or subnormal: exact in f32
    return sign ? -v : v;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t f32_to_f16(float f) noexcept {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00);   // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                                 // below 2^-14: subnormal or zero
    const float a = std::fabs(f);
    return uint16_t(sign | uint16_t(std::nearbyint(a * 16777216.0f)));  // units of 2^-24
  }
  uint32_t v = abs - (112u << 23);  // rebias to f16, mantissa still 23 bits
  v += 0xfff + ((v >> 13) & 1);     // round to nearest even at bit 13
  return uint16_t(sign | uint16_t(v >> 13));
}

// Element-wise combine used by the user MPI_Ops: inout[i] = op(in[i], inout[i]).
enum class Combine { Sum, Max, Min };

template <float (*ToF32)(uint16_t), uint16_t (*FromF32)(float)>
void combine16(const uint16_t* in, uint16_t* inout, int count, Combine op) noexcept {
  for (int i = 0; i < count; ++i) {
    const float a = ToF32(in[i]), b = ToF32(inout[i]);
    float r = op == Combine::Sum ? a + b : op == Combine::Max ? std::fmax(a, b) : std::fmin(a, b);
    inout[i] = FromF32(r);
  }
}

}  // namespace tandem::mpi

#endif
