// CUDA backend — element conversion through double between every dtype (f64
// included), shared by cast (ops/cast.cu) and fill (ops/tensor.cu): floats
// round once to nearest-even (16-bit formats by tandem/half.hpp, no double
// rounding); integers round to nearest-even, saturate, NaN -> 0 (the
// catalog's cast rule).
#ifndef TANDEM_CUDA_OPS_CONVERT_CUH
#define TANDEM_CUDA_OPS_CONVERT_CUH

#include <limits>
#include <type_traits>

#include "ops/kernels.cuh"

namespace tandem::cuda {

template <class T>
constexpr bool kHalf = std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>;

template <class T>
__device__ __forceinline__ double load_any(const T* p, int64_t i) {
  if constexpr (kHalf<T> || std::is_same_v<T, float>)
    return static_cast<double>(math::to_float(p[i]));
  else
    return static_cast<double>(p[i]);
}

// Integers: round to nearest-even, saturate, NaN -> 0 (catalog cast rule).
template <class T>
__device__ __forceinline__ void store_any(T* p, int64_t i, double v) {
  if constexpr (std::is_same_v<T, double>) {
    p[i] = v;
  } else if constexpr (std::is_same_v<T, float>) {
    p[i] = static_cast<float>(v);
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    p[i] = bf16_t{f64_to_bf16(v)};  // one rounding (tandem/half.hpp)
  } else if constexpr (std::is_same_v<T, f16_t>) {
    p[i] = f16_t{f64_to_f16(v)};
  } else {
    if (isnan(v)) {
      p[i] = 0;
      return;
    }
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    const double r = rint(v);
    p[i] = r <= lo   ? std::numeric_limits<T>::min()
           : r >= hi ? std::numeric_limits<T>::max()
                     : static_cast<T>(r);
  }
}

// Calls f(T{}) with the storage type of any dtype.
template <class F>
void dispatch_any(tdm_dtype t, F&& f) {
  switch (t) {
    case TDM_S8:
      return f(int8_t{});
    case TDM_U8:
      return f(uint8_t{});
    case TDM_S32:
      return f(int32_t{});
    case TDM_S64:
      return f(int64_t{});
    case TDM_F64:
      return f(double{});
    default:
      return dispatch_float(t, f);
  }
}

}  // namespace tandem::cuda

#endif  // TANDEM_CUDA_OPS_CONVERT_CUH
