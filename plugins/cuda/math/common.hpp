// CUDA backend — per-element math shared by the device kernels and the
// host-side unit tests (tests/cuda). Everything here is header-only, needs no
// CUDA header, and compiles with g++ (TDM_HD expands to nothing) as well as
// with nvcc (TDM_HD = __host__ __device__), so the exact code that runs on the
// GPU is tested on a machine without one. The f16/bf16 conversions are the
// SDK's (tandem/half.hpp), which compile for the device as well.
#ifndef TANDEM_CUDA_MATH_COMMON_HPP
#define TANDEM_CUDA_MATH_COMMON_HPP

#include <cstdint>

#include "tandem/half.hpp"

#if defined(__CUDACC__)
#define TDM_HD __host__ __device__
#else
#define TDM_HD
#endif

namespace tandem::cuda::math {

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
  return bf16_to_f32(v.bits);
}
TDM_HD inline float to_float(f16_t v) {
  return f16_to_f32(v.bits);
}

template <class T>
struct Store;
template <>
struct Store<float> {
  TDM_HD static float from(float v) { return v; }
};
template <>
struct Store<bf16_t> {
  TDM_HD static bf16_t from(float v) { return bf16_t{f32_to_bf16(v)}; }
};
template <>
struct Store<f16_t> {
  TDM_HD static f16_t from(float v) { return f16_t{f32_to_f16(v)}; }
};
template <class T>
TDM_HD inline T from_float(float v) {
  return Store<T>::from(v);
}

// n items (n >= 0) cut into about `parts` chunks whose length is a multiple
// of `multiple` (the last chunk may be shorter): how the deterministic
// reductions split their work, so their order depends on the shape alone.
struct Chunks {
  int64_t length = 0;  // items per chunk
  int64_t count = 1;   // chunks; 1 when there are no items
};
inline Chunks whole_chunks(int64_t n, int64_t parts, int64_t multiple) {
  Chunks c;
  int64_t per = (n + parts - 1) / parts;
  per = (per + multiple - 1) / multiple * multiple;
  c.length = per > 0 ? per : multiple;
  c.count = n == 0 ? 1 : (n + c.length - 1) / c.length;
  return c;
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_COMMON_HPP
