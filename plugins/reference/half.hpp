// Reference backend — conversions between f32/f64 and the 16-bit float
// formats (IEEE binary16 "f16" and bfloat16 "bf16").
//
// Written for obvious correctness, not speed: a value is decoded with ldexp
// and encoded by scaling to an integer significand and rounding that integer
// to nearest, ties to even. Everything goes through double, which holds every
// f32/f16/bf16 value exactly, so f32 -> half is a single rounding.
#ifndef TANDEM_REFERENCE_HALF_HPP
#define TANDEM_REFERENCE_HALF_HPP

#include <cmath>
#include <cstdint>

namespace tandem::reference {

// Layout of a binary floating format with 1 sign bit.
struct HalfFormat {
  int exponent_bits;
  int mantissa_bits;  // stored fraction bits (implicit leading 1 not counted)
};
inline constexpr HalfFormat kF16{5, 10};
inline constexpr HalfFormat kBF16{8, 7};

// Rounds `value` to the format, nearest-even. NaN becomes the quiet NaN with
// the same sign; overflow becomes infinity; tiny values become subnormals or
// signed zero.
inline uint16_t encode_half(double value, HalfFormat f) {
  const uint16_t sign = std::signbit(value) ? uint16_t(1u << 15) : uint16_t(0);
  const uint16_t exp_all_ones = uint16_t(((1u << f.exponent_bits) - 1u) << f.mantissa_bits);
  if (std::isnan(value)) return uint16_t(sign | exp_all_ones | (1u << (f.mantissa_bits - 1)));
  const double a = std::fabs(value);
  if (std::isinf(a)) return uint16_t(sign | exp_all_ones);
  if (a == 0.0) return sign;

  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const int emin = 1 - bias;  // exponent of the smallest normal
  int e = 0;
  std::frexp(a, &e);                           // a = m * 2^e, m in [0.5, 1)
  int exponent = e - 1 > emin ? e - 1 : emin;  // floor(log2 a), clamped for subnormals
  // Scale so that one unit in the last place of the target is 1.0; exact.
  const double scaled = std::ldexp(a, f.mantissa_bits - exponent);
  double rounded = std::floor(scaled);
  const double rest = scaled - rounded;  // exact: scaled has few fraction bits
  if (rest > 0.5 || (rest == 0.5 && std::fmod(rounded, 2.0) != 0.0)) rounded += 1.0;

  uint64_t significand = static_cast<uint64_t>(rounded);
  const uint64_t implicit_one = uint64_t(1) << f.mantissa_bits;
  if (significand >= 2 * implicit_one) {  // rounding carried into a new binade
    significand >>= 1;
    ++exponent;
  }
  if (exponent > bias) return uint16_t(sign | exp_all_ones);            // overflow -> inf
  if (significand < implicit_one) return uint16_t(sign | significand);  // subnormal (exponent == emin)
  const uint64_t biased = static_cast<uint64_t>(exponent + bias);
  return uint16_t(sign | (biased << f.mantissa_bits) | (significand - implicit_one));
}

// Exact decoding of the format into a double.
inline double decode_half(uint16_t bits, HalfFormat f) {
  const bool negative = (bits >> 15) != 0;
  const uint32_t exp_mask = (1u << f.exponent_bits) - 1u;
  const uint32_t biased = (bits >> f.mantissa_bits) & exp_mask;
  const uint32_t mantissa = bits & ((1u << f.mantissa_bits) - 1u);
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  double magnitude = 0.0;
  if (biased == exp_mask) {
    magnitude = mantissa != 0 ? std::nan("") : INFINITY;
  } else if (biased == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - bias - f.mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa + (1u << f.mantissa_bits)),
                           static_cast<int>(biased) - bias - f.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

inline uint16_t f16_from_double(double v) {
  return encode_half(v, kF16);
}
inline uint16_t bf16_from_double(double v) {
  return encode_half(v, kBF16);
}
inline double f16_to_double(uint16_t b) {
  return decode_half(b, kF16);
}
inline double bf16_to_double(uint16_t b) {
  return decode_half(b, kBF16);
}

}  // namespace tandem::reference

#endif  // TANDEM_REFERENCE_HALF_HPP
