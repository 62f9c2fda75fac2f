// CUDA backend — batch_norm (train, inference) and its gradient, x seen as
// [N, C, L]. One block per channel; statistics in f32 with a two-pass
// variance (block_mean_var in kernels.cuh), biased for normalising; rstd =
// 1/sqrt(var + eps). batch_norm_train updates the running variance with the
// unbiased variance (PyTorch).
#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

struct Bn {
  int64_t N, C, L;
  float eps, momentum;
};

__device__ __forceinline__ int64_t bn_index(const Bn& b, int64_t c, int64_t j) {
  return ((j / b.L) * b.C + c) * b.L + j % b.L;
}

__global__ void bn_train_kernel(const float* x, const float* gamma, const float* beta, const float* rm,
                                const float* rv, float* y, float* smean, float* srstd, float* rm_out,
                                float* rv_out, Bn b) {
  __shared__ float scratch[32];
  const int64_t c = blockIdx.x, M = b.N * b.L;
  float mean, var;
  block_mean_var(
      x, M, [&](int64_t j) { return bn_index(b, c, j); }, scratch, mean, var);
  const float rstd = rsqrtf(var + b.eps), g = gamma[c], be = beta[c];
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    const int64_t k = bn_index(b, c, j);
    y[k] = (x[k] - mean) * rstd * g + be;
  }
  if (threadIdx.x == 0) {
    smean[c] = mean, srstd[c] = rstd;
    const float unbiased = M > 1 ? var * static_cast<float>(M) / static_cast<float>(M - 1) : var;
    rm_out[c] = (1.0f - b.momentum) * rm[c] + b.momentum * mean;
    rv_out[c] = (1.0f - b.momentum) * rv[c] + b.momentum * unbiased;
  }
}

__global__ void bn_infer_kernel(const float* x, const float* gamma, const float* beta, const float* mean,
                                const float* var, float* y, Bn b) {
  TDM_GRID_STRIDE(i, b.N * b.C * b.L) {
    const int64_t c = (i / b.L) % b.C;
    y[i] = (x[i] - mean[c]) * rsqrtf(var[c] + b.eps) * gamma[c] + beta[c];
  }
}

__global__ void bn_grad_kernel(const float* dy, const float* x, const float* gamma, const float* smean,
                               const float* srstd, float* dx, float* dgamma, float* dbeta, Bn b) {
  __shared__ float scratch[32];
  const int64_t c = blockIdx.x, M = b.N * b.L;
  const float mean = smean[c], rstd = srstd[c];
  float sd = 0.0f, sdx = 0.0f;
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    const int64_t k = bn_index(b, c, j);
    sd += dy[k], sdx += dy[k] * (x[k] - mean) * rstd;
  }
  sd = block_sum(sd, scratch);
  sdx = block_sum(sdx, scratch);
  const float md = sd / static_cast<float>(M), mdx = sdx / static_cast<float>(M), g = gamma[c];
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    const int64_t k = bn_index(b, c, j);
    dx[k] = g * rstd * (dy[k] - md - (x[k] - mean) * rstd * mdx);
  }
  if (threadIdx.x == 0) dgamma[c] = sdx, dbeta[c] = sd;
}

Bn bn_of(const Check& c, const Dims& x) {
  Bn b{x[0], x[1], 1, static_cast<float>(c.op().float_attr("epsilon", 1e-5)),
       static_cast<float>(c.op().float_attr("momentum", 0.1))};
  for (size_t k = 2; k < x.size(); ++k) b.L *= x[k];
  decline_if(c, one_block_per_limit(b.C, "channel"));
  return b;
}

std::unique_ptr<Kernel> prepare_bn_train(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.primary_dtype(0, kF32);
  const Dims x = c.in(0).dims;
  const Bn b = bn_of(c, x);
  return make_kernel("batch_norm_train", [=](CudaStream& s, void* const* in, void* const* o, void*) {
    if (b.C == 0 || b.N * b.L == 0) return;
    auto f = [&](void* p) { return static_cast<float*>(p); };
    bn_train_kernel<<<unsigned(b.C), kBlock, 0, s.get()>>>(f(in[0]), f(in[1]), f(in[2]), f(in[3]), f(in[4]),
                                                           f(o[0]), f(o[1]), f(o[2]), f(o[3]), f(o[4]), b);
  });
}

std::unique_ptr<Kernel> prepare_bn_infer(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.primary_dtype(0, kF32);
  const Dims x = c.in(0).dims;
  const Bn b = bn_of(c, x);
  return make_kernel("batch_norm_inference", [=](CudaStream& s, void* const* in, void* const* o, void*) {
    const int64_t n = b.N * b.C * b.L;
    if (n == 0) return;
    auto f = [&](void* p) { return static_cast<float*>(p); };
    bn_infer_kernel<<<grid_for(n), kThreads, 0, s.get()>>>(f(in[0]), f(in[1]), f(in[2]), f(in[3]), f(in[4]),
                                                           f(o[0]), b);
  });
}

std::unique_ptr<Kernel> prepare_bn_grad(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.primary_dtype(0, kF32);
  const Dims x = c.in(0).dims;
  const Bn b = bn_of(c, x);
  return make_kernel("batch_norm_grad", [=](CudaStream& s, void* const* in, void* const* o, void*) {
    if (b.C == 0 || b.N * b.L == 0) return;
    auto f = [&](void* p) { return static_cast<float*>(p); };
    bn_grad_kernel<<<unsigned(b.C), kBlock, 0, s.get()>>>(f(in[0]), f(in[1]), f(in[2]), f(in[3]), f(in[4]),
                                                          f(o[0]), f(o[1]), f(o[2]), b);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("batch_norm_train", prepare_bn_train);
  r.add("batch_norm_inference", prepare_bn_infer);
  r.add("batch_norm_grad", prepare_bn_grad);
});

}  // namespace

}  // namespace tandem::cuda
