// CUDA backend — cast between every pair of dtypes: one grid-stride kernel
// per pair, through double (ops/convert.cuh), except between f32 and the
// 16-bit floats, what amp casts every step: there an f32 value converts
// directly (tandem/half.hpp's f32_to_bf16 and f32_to_f16 give the bits the
// double route gives, since an f32 is exact in double), and where the
// tensors allow, 8 elements a thread move as 16-byte vectors.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ops/convert.cuh"

namespace tandem::cuda {
namespace {

// f32 to or from bf16/f16: the pairs amp's casts are.
template <class S, class D>
constexpr bool kFloatHalfPair = (std::is_same_v<S, float> && kHalf<D>) ||
                                (kHalf<S> && std::is_same_v<D, float>);

template <class S, class D>
__global__ void cast_kernel(const S* x, D* y, int64_t n) {
  if constexpr (kFloatHalfPair<S, D>)
    TDM_GRID_STRIDE(i, n) y[i] = math::from_float<D>(math::to_float(x[i]));
  else
    TDM_GRID_STRIDE(i, n) store_any(y, i, load_any(x, i));
}

// 8 elements a thread: 32 bytes of f32 and 16 of 16-bit values.
constexpr int kVector = 8;

template <class S, class D>
__global__ void cast_vector_kernel(const S* x, D* y, int64_t vectors) {
  TDM_GRID_STRIDE(v, vectors) {
    alignas(16) S in[kVector];
    alignas(16) D out[kVector];
    const uint4* from = reinterpret_cast<const uint4*>(x + v * kVector);
#pragma unroll
    for (int w = 0; w < int(sizeof in / sizeof(uint4)); ++w) reinterpret_cast<uint4*>(in)[w] = from[w];
#pragma unroll
    for (int e = 0; e < kVector; ++e) out[e] = math::from_float<D>(math::to_float(in[e]));
    uint4* to = reinterpret_cast<uint4*>(y + v * kVector);
#pragma unroll
    for (int w = 0; w < int(sizeof out / sizeof(uint4)); ++w) to[w] = reinterpret_cast<const uint4*>(out)[w];
  }
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

std::unique_ptr<Kernel> prepare_cast(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const std::vector<tdm_dtype> all = {TDM_F32, TDM_F64, TDM_BF16, TDM_F16, TDM_S8, TDM_U8, TDM_S32, TDM_S64};
  c.primary_dtype(0, all);
  const tdm_dtype dst = c.out(0).dtype;
  if (std::find(all.begin(), all.end(), dst) == all.end()) c.unsupported("output dtype is not implemented");
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_any(c.in(0).dtype, [&](auto stag) {
    dispatch_any(dst, [&](auto dtag) {
      using S = decltype(stag);
      using D = decltype(dtag);
      k = make_kernel("cast", [=](CudaStream& s, void* const* in, void* const* o, void*) {
        if (n == 0) return;
        const S* x = static_cast<const S*>(in[0]);
        D* y = static_cast<D*>(o[0]);
        if constexpr (kFloatHalfPair<S, D>) {
          if (n % kVector == 0 && aligned16(x) && aligned16(y)) {
            const int64_t vectors = n / kVector;
            cast_vector_kernel<S, D><<<grid_for(vectors), kThreads, 0, s.get()>>>(x, y, vectors);
            return;
          }
        }
        cast_kernel<S, D><<<grid_for(n), kThreads, 0, s.get()>>>(x, y, n);
      });
    });
  });
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) { r.add("cast", prepare_cast); });

}  // namespace

}  // namespace tandem::cuda
