// CUDA backend — per-element math shared by the device kernels and the
// host-side unit tests (tests/cuda). Everything here is header-only, needs no
// CUDA header, and compiles with g++ (TDM_HD expands to nothing) as well as
// with nvcc (TDM_HD = __host__ __device__), so the exact code that runs on the
// GPU is tested on a machine without one.
#ifndef TANDEM_CUDA_MATH_COMMON_HPP
#define TANDEM_CUDA_MATH_COMMON_HPP

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TDM_HD __host__ __device__
#else
#define TDM_HD
#endif

namespace tandem::cuda::math {

TDM_HD inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

TDM_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// ---- bfloat16: the upper half of an f32, rounded to nearest, ties to even.
TDM_HD inline uint16_t bf16_from_float(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
TDM_HD inline float bf16_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

// ---- IEEE binary16, rounded to nearest, ties to even (subnormals, overflow
// to infinity, NaN kept quiet with its sign).
TDM_HD inline uint16_t f16_from_float(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (a < 0x38800000u) {               // below 2^-14: subnormal half (or zero)
    if (a < 0x33000000u) return sign;  // below 2^-25 (half of the smallest subnormal) -> 0
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(a >> 23);  // 14..24 (value = mant * 2^(e-150))
    // half subnormal unit is 2^-24: result = mant * 2^(e-150+24) = mant >> (126 - e)
    const uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t r = q + ((rem > halfway || (rem == halfway && (q & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | r);
  }
  // normal: rebias exponent 127 -> 15 and drop 13 mantissa bits with RNE
  uint32_t v = a - 0x38000000u;  // (127-15) << 23
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

TDM_HD inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) return bits_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return bits_float(sign);
    // subnormal: m * 2^-24, exact in f32
    float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

// ---- storage types: what a tensor element is in memory. Compute is f32
// (f64 is declined by this backend; integers compute in their own type).
struct bf16_t {
  uint16_t bits;
};
struct f16_t {
  uint16_t bits;
};

TDM_HD inline float to_float(float v) {
  return v;
}
TDM_HD inline float to_float(bf16_t v) {
  return bf16_to_float(v.bits);
}
TDM_HD inline float to_float(f16_t v) {
  return f16_to_float(v.bits);
}

template <class T>
struct Store;
template <>
struct Store<float> {
  TDM_HD static float from(float v) { return v; }
};
template <>
struct Store<bf16_t> {
  TDM_HD static bf16_t from(float v) { return bf16_t{bf16_from_float(v)}; }
};
template <>
struct Store<f16_t> {
  TDM_HD static f16_t from(float v) { return f16_t{f16_from_float(v)}; }
};
template <class T>
TDM_HD inline T from_float(float v) {
  return Store<T>::from(v);
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_COMMON_HPP
