// Tandem SDK — the 16-bit float formats, part of the header-only C++ helper:
// IEEE binary16 ("f16") and bfloat16 ("bf16") to and from f32 and f64.
//
// The catalog's rule (sdk/ops.md, Conventions): a store into f16 or bf16
// rounds to nearest, ties to even, once; overflow gives ±infinity, tiny
// values become subnormals or a signed zero, NaN stays NaN (quiet, sign
// kept). Widening is exact. These are the conversions every backend, the
// conformance kit and the comm plugins use, so a value rounds to the same
// bits everywhere.
//
// Integer arithmetic on the bit patterns only: no floating-point rounding
// mode, no libm call, the same answer on every compiler. Every function is
// usable in CUDA device code (TANDEM_HOST_DEVICE is __host__ __device__
// under nvcc, nothing elsewhere).
//
// f64 -> 16 bits rounds once, not twice: the double is first rounded to f32
// *to odd* (truncated, the last bit set when anything was dropped), which
// keeps enough information for the second, nearest-even rounding to give
// the correctly rounded result (f32 has at least two more significand bits
// than either 16-bit format in every binade where their grid is coarser).
#ifndef TANDEM_HALF_HPP
#define TANDEM_HALF_HPP

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif

namespace tandem {

namespace half_detail {

TANDEM_HOST_DEVICE inline uint32_t bits_of(float f) noexcept {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

TANDEM_HOST_DEVICE inline float float_of(uint32_t u) noexcept {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

TANDEM_HOST_DEVICE inline uint64_t bits_of(double d) noexcept {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
#endif
}

}  // namespace half_detail

// ---- bfloat16: the upper half of an f32 -----------------------------------

TANDEM_HOST_DEVICE inline float bf16_to_f32(uint16_t bits) noexcept {
  return half_detail::float_of(static_cast<uint32_t>(bits) << 16);
}

TANDEM_HOST_DEVICE inline uint16_t f32_to_bf16(float value) noexcept {
  uint32_t u = half_detail::bits_of(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // nearest, ties to even; a carry moves into the exponent
  return static_cast<uint16_t>(u >> 16);
}

// ---- IEEE binary16 ----------------------------------------------------------

TANDEM_HOST_DEVICE inline float f16_to_f32(uint16_t bits) noexcept {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1fu) return half_detail::float_of(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in f32
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return half_detail::float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));  // rebias 15 -> 127
}

TANDEM_HOST_DEVICE inline uint16_t f32_to_f16(float value) noexcept {
  const uint32_t u = half_detail::bits_of(value);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (a < 0x38800000u) {                                               // below 2^-14: subnormal or zero
    if (a < 0x33000000u) return sign;  // below 2^-25, half the smallest subnormal
    // value = m · 2^(e-150) with the implicit bit; in units of 2^-24 that is m >> (126 - e).
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(a >> 23);  // 14..24
    const uint32_t q = m >> shift, rest = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    const uint32_t up = rest > halfway || (rest == halfway && (q & 1u) != 0) ? 1u : 0u;
    return static_cast<uint16_t>(sign | (q + up));
  }
  uint32_t v = a - 0x38000000u;    // rebias 127 -> 15, 23 mantissa bits still
  v += 0xfffu + ((v >> 13) & 1u);  // nearest, ties to even at bit 13
  return static_cast<uint16_t>(sign | (v >> 13));
}

// ---- from f64, one rounding ----------------------------------------------

// `value` rounded to f32 toward zero, with the last significand bit set when
// the result is inexact ("round to odd"). NaN stays NaN; beyond the f32
// range the result is FLT_MAX (odd), which every 16-bit rounding takes to
// infinity; below it, the smallest subnormal (odd), which rounds to zero.
TANDEM_HOST_DEVICE inline float f64_to_f32_odd(double value) noexcept {
  const uint64_t u = half_detail::bits_of(value);
  const uint32_t sign = static_cast<uint32_t>(u >> 32) & 0x80000000u;
  const uint64_t a = u & 0x7fffffffffffffffull;
  if (a > 0x7ff0000000000000ull)  // NaN: keep the top payload bits, stay quiet
    return half_detail::float_of(sign | 0x7fc00000u | static_cast<uint32_t>((a >> 29) & 0x3fffffu));
  if (a == 0x7ff0000000000000ull) return half_detail::float_of(sign | 0x7f800000u);
  const int exponent = static_cast<int>(a >> 52) - 1023;  // unbiased; subnormal doubles count as -1023
  if (exponent > 127) return half_detail::float_of(sign | 0x7f7fffffu);
  if (exponent < -150) return half_detail::float_of(sign | (a != 0 ? 1u : 0u));
  // 53-bit significand (implicit bit included; subnormal doubles are far
  // below the f32 range and handled above).
  const uint64_t significand = (a & 0xfffffffffffffull) | 0x10000000000000ull;
  // f32 keeps 24 bits for a normal result; for a subnormal one, fewer.
  const int keep = exponent >= -126 ? 24 : 24 - (-126 - exponent);  // 0..24
  const int drop = 53 - keep;
  uint64_t kept = significand >> drop;
  if ((significand & ((uint64_t(1) << drop) - 1)) != 0) kept |= 1u;  // round to odd
  uint32_t bits = 0;
  if (exponent >= -126) {
    bits = (static_cast<uint32_t>(exponent + 127) << 23) | (static_cast<uint32_t>(kept) & 0x7fffffu);
  } else {
    bits = static_cast<uint32_t>(kept);  // subnormal: exponent field 0
  }
  return half_detail::float_of(sign | bits);
}

TANDEM_HOST_DEVICE inline uint16_t f64_to_bf16(double value) noexcept {
  return f32_to_bf16(f64_to_f32_odd(value));
}

TANDEM_HOST_DEVICE inline uint16_t f64_to_f16(double value) noexcept {
  return f32_to_f16(f64_to_f32_odd(value));
}

}  // namespace tandem

#endif  // TANDEM_HALF_HPP
