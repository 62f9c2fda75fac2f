// CUDA backend — dropout and its gradient. The mask is the catalog's
// counter-based hash (math/dropout.hpp, tested on the CPU), bit-identical to
// the reference; the per-step seed offset is read on the device.
#include "math/dropout.hpp"
#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

template <class T>
__global__ void dropout_kernel(const T* x, T* y, uint8_t* mask, int64_t n, uint64_t base_seed,
                               const int64_t* seed_offset, uint32_t threshold, float den) {
  // The per-step offset is read on the device: a new mask per step, no host sync.
  const uint64_t seed = base_seed + (seed_offset ? static_cast<uint64_t>(*seed_offset) : 0);
  TDM_GRID_STRIDE(i, n) {
    const bool keep = math::dropout_keep(seed, static_cast<uint64_t>(i), threshold);
    st(y, i, math::dropout_apply(ld(x, i), keep, den));
    mask[i] = keep ? 1 : 0;
  }
}

template <class T>
__global__ void dropout_grad_kernel(const T* dy, const uint8_t* mask, T* dx, int64_t n, float den) {
  TDM_GRID_STRIDE(i, n) st(dx, i, math::dropout_apply(ld(dy, i), mask[i] != 0, den));
}

std::unique_ptr<Kernel> prepare_dropout(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  const bool has_offset = c.has_input(1);
  const double p = c.float_attr("p");
  const uint64_t seed = static_cast<uint64_t>(v.int_attr("seed", 0));
  const uint32_t threshold = math::dropout_threshold(p);
  const float den = static_cast<float>(1.0 - p);
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel("dropout", [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      dropout_kernel<T><<<grid_for(n), kThreads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<T*>(o[0]), static_cast<uint8_t*>(o[1]), n, seed,
          has_offset ? static_cast<const int64_t*>(in[1]) : nullptr, threshold, den);
    });
  });
  return k;
}

std::unique_ptr<Kernel> prepare_dropout_grad(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  const float den = static_cast<float>(1.0 - c.float_attr("p"));
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel("dropout_grad", [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      dropout_grad_kernel<T><<<grid_for(n), kThreads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<const uint8_t*>(in[1]), static_cast<T*>(o[0]), n, den);
    });
  });
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("dropout", prepare_dropout);
  r.add("dropout_grad", prepare_dropout_grad);
});

}  // namespace

}  // namespace tandem::cuda
