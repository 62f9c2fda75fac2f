// CUDA backend — layer_norm and its gradient. One block per row; statistics
// in f32 with a two-pass variance (block_mean_var in kernels.cuh), biased for
// normalising; rstd = 1/sqrt(var + eps). dgamma/dbeta are the two-stage
// column sums of ops/column_sum.cuh: coalesced along D, a fixed summation
// order (math/column_sum.hpp), bitwise reproducible; their f32 partials are
// the kernel's workspace.
#include "ops/column_sum.cuh"

namespace tandem::cuda {
namespace {

template <class T>
__global__ void layer_norm_kernel(const T* x, const T* gamma, const T* beta, T* y, float* mean_out,
                                  float* rstd_out, int64_t D, float eps) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * D;
  float mean, var;
  block_mean_var(
      xr, D, [](int64_t j) { return j; }, scratch, mean, var);
  const float rstd = rsqrtf(var + eps);
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
    st(y, row * D + j, (ld(xr, j) - mean) * rstd * ld(gamma, j) + ld(beta, j));
  if (threadIdx.x == 0) mean_out[row] = mean, rstd_out[row] = rstd;
}

// dx, plus the addend when there is one (it may be dx itself: each thread
// reads its elements before it writes them).
template <class T>
__global__ void layer_norm_dx_kernel(const T* dy, const T* x, const T* gamma, const float* mean,
                                     const float* rstd, const T* addend, T* dx, int64_t D) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x, base = row * D;
  const float mu = mean[row], rs = rstd[row];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    const float g = ld(dy, base + j) * ld(gamma, j), xh = (ld(x, base + j) - mu) * rs;
    sg += g, sgx += g * xh;
  }
  sg = block_sum(sg, scratch) / static_cast<float>(D);
  sgx = block_sum(sgx, scratch) / static_cast<float>(D);
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    const float g = ld(dy, base + j) * ld(gamma, j), xh = (ld(x, base + j) - mu) * rs;
    st(dx, base + j, rs * (g - sg - xh * sgx) + (addend ? ld(addend, base + j) : 0.0f));
  }
}

std::unique_ptr<Kernel> prepare_layer_norm(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kF32Bf16);
  const Dims x = c.in(0).dims;
  const int64_t D = x.back(), rows = D == 0 ? 0 : numel(x) / D;
  decline_if(c, one_block_per_limit(rows, "row"));
  const float eps = static_cast<float>(v.float_attr("epsilon", 1e-5));
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel("layer_norm", [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (rows == 0) return;
      layer_norm_kernel<T><<<unsigned(rows), kBlock, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<const T*>(in[2]),
          static_cast<T*>(o[0]), static_cast<float*>(o[1]), static_cast<float*>(o[2]), D, eps);
    });
  });
  return k;
}

std::unique_ptr<Kernel> prepare_layer_norm_grad(CudaDevice&, const OpView& v, size_t& workspace) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kF32Bf16);
  const Dims x = c.in(0).dims;
  const int64_t D = x.back(), rows = D == 0 ? 0 : numel(x) / D;
  decline_if(c, one_block_per_limit(rows, "row"));
  const bool addend = c.has_input(5);
  const math::ColumnSumPlan plan = math::column_sum_plan(rows, D);
  workspace = column_sum_workspace<2>(plan);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel("layer_norm_grad", [=](CudaStream& s, void* const* in, void* const* o, void* ws) {
      const auto *dy = static_cast<const T*>(in[0]), *xx = static_cast<const T*>(in[1]);
      const auto *mean = static_cast<const float*>(in[3]), *rstd = static_cast<const float*>(in[4]);
      if (rows > 0)
        layer_norm_dx_kernel<T><<<unsigned(rows), kBlock, 0, s.get()>>>(
            dy, xx, static_cast<const T*>(in[2]), mean, rstd, addend ? static_cast<const T*>(in[5]) : nullptr,
            static_cast<T*>(o[0]), D);
      launch_column_sums(plan, math::LayerNormParamTerm<T>{dy, xx, mean, rstd, D},
                         ColumnOutputs<T, 2>{{static_cast<T*>(o[1]), static_cast<T*>(o[2])}}, ws, s.get());
    });
  });
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("layer_norm", prepare_layer_norm);
  r.add("layer_norm_grad", prepare_layer_norm_grad);
});

}  // namespace

}  // namespace tandem::cuda
