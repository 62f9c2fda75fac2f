// CUDA backend — rms_norm and its gradient. One block per row, sums in f32
// through block_sum (kernels.cuh); rstd = 1/sqrt(mean(x²) + eps) is saved in
// f32 whatever the data dtype. dgamma is the two-stage column sum of
// ops/column_sum.cuh (row chunks spread over the whole GPU, a fixed
// summation order, no atomics: reproducible bits); its f32 partials are the
// kernel's workspace.
#include <cmath>

#include "ops/column_sum.cuh"

namespace tandem::cuda {
namespace {

template <class T>
__global__ void rms_norm_kernel(const T* x, const T* gamma, T* y, float* rstd_out, int64_t D, float eps) {
  __shared__ float scratch[32];
  const int64_t base = blockIdx.x * D;
  float sq = 0.0f;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    const float v = ld(x, base + j);
    sq += v * v;
  }
  sq = block_sum(sq, scratch);
  const float rs = rsqrtf(sq / static_cast<float>(D) + eps);
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) st(y, base + j, ld(x, base + j) * rs * ld(gamma, j));
  if (threadIdx.x == 0) rstd_out[blockIdx.x] = rs;
}

// dx = rstd·(g − x̂·mean_D(g·x̂)) (+ addend, which may be dx), g = dy·gamma,
// x̂ = x·rstd.
template <class T>
__global__ void rms_norm_dx_kernel(const T* dy, const T* x, const T* gamma, const float* rstd,
                                   const T* addend, T* dx, int64_t D) {
  __shared__ float scratch[32];
  const int64_t base = blockIdx.x * D;
  const float rs = rstd[blockIdx.x];
  float sgx = 0.0f;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
    sgx += ld(dy, base + j) * ld(gamma, j) * ld(x, base + j) * rs;
  const float mean_gx = block_sum(sgx, scratch) / static_cast<float>(D);
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    const float g = ld(dy, base + j) * ld(gamma, j), xh = ld(x, base + j) * rs;
    st(dx, base + j, rs * (g - xh * mean_gx) + (addend ? ld(addend, base + j) : 0.0f));
  }
}

std::unique_ptr<Kernel> prepare_rms_norm(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kF32Bf16);
  const Dims x = c.in(0).dims;
  const int64_t D = x.back(), rows = D == 0 ? 0 : numel(x) / D;
  decline_if(c, one_block_per_limit(rows, "row"));
  const float eps = static_cast<float>(c.float_attr("epsilon"));
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel("rms_norm", [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (rows == 0) return;
      rms_norm_kernel<T>
          <<<unsigned(rows), kBlock, 0, s.get()>>>(static_cast<const T*>(in[0]), static_cast<const T*>(in[1]),
                                                   static_cast<T*>(o[0]), static_cast<float*>(o[1]), D, eps);
    });
  });
  return k;
}

std::unique_ptr<Kernel> prepare_rms_norm_grad(CudaDevice&, const OpView& v, size_t& workspace) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kF32Bf16);
  const Dims x = c.in(0).dims;
  const int64_t D = x.back(), rows = D == 0 ? 0 : numel(x) / D;
  decline_if(c, one_block_per_limit(rows, "row"));
  const bool addend = c.has_input(4);
  const math::ColumnSumPlan plan = math::column_sum_plan(rows, D);
  workspace = column_sum_workspace<1>(plan);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel("rms_norm_grad", [=](CudaStream& s, void* const* in, void* const* o, void* ws) {
      const auto *dy = static_cast<const T*>(in[0]), *xx = static_cast<const T*>(in[1]);
      const auto* rstd = static_cast<const float*>(in[3]);
      if (rows > 0)
        rms_norm_dx_kernel<T><<<unsigned(rows), kBlock, 0, s.get()>>>(
            dy, xx, static_cast<const T*>(in[2]), rstd, addend ? static_cast<const T*>(in[4]) : nullptr,
            static_cast<T*>(o[0]), D);
      launch_column_sums(plan, math::RmsNormParamTerm<T>{dy, xx, rstd, D},
                         ColumnOutputs<T, 1>{{static_cast<T*>(o[1])}}, ws, s.get());
    });
  });
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("rms_norm", prepare_rms_norm);
  r.add("rms_norm_grad", prepare_rms_norm_grad);
});

}  // namespace

}  // namespace tandem::cuda
