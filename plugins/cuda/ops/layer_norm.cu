// CUDA backend — layer_norm, batch_norm (train, inference) and gradients.
// One block per row (layer norm) or per channel (batch norm); statistics in
// f32 with a two-pass variance (mean first, then Σ(x-mean)²), biased for
// normalising; rstd = 1/sqrt(var + eps). batch_norm_train updates the
// running variance with the unbiased variance (PyTorch). layer_norm's
// dgamma/dbeta are column sums: one thread per column over all rows.
#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

constexpr int kBlock = 256;

// Mean and rstd of n values at x[f(j)], j < n.
template <class T, class Index>
__device__ void stats(const T* x, int64_t n, Index f, float eps, float* scratch, float& mean, float& var) {
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += ld(x, f(j));
  mean = block_sum(s, scratch) / static_cast<float>(n);
  float q = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float d = ld(x, f(j)) - mean;
    q += d * d;
  }
  var = block_sum(q, scratch) / static_cast<float>(n);
  (void)eps;
}

template <class T>
__global__ void layer_norm_kernel(const T* x, const T* gamma, const T* beta, T* y, float* mean_out,
                                  float* rstd_out, int64_t D, float eps) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * D;
  float mean, var;
  stats(
      xr, D, [](int64_t j) { return j; }, eps, scratch, mean, var);
  const float rstd = rsqrtf(var + eps);
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
    st(y, row * D + j, (ld(xr, j) - mean) * rstd * ld(gamma, j) + ld(beta, j));
  if (threadIdx.x == 0) mean_out[row] = mean, rstd_out[row] = rstd;
}

template <class T>
__global__ void layer_norm_dx_kernel(const T* dy, const T* x, const T* gamma, const float* mean,
                                     const float* rstd, T* dx, int64_t D) {
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
    st(dx, base + j, rs * (g - sg - xh * sgx));
  }
}

template <class T>
__global__ void layer_norm_dparams_kernel(const T* dy, const T* x, const float* mean, const float* rstd,
                                          T* dgamma, T* dbeta, int64_t rows, int64_t D) {
  TDM_GRID_STRIDE(j, D) {
    float dg = 0.0f, db = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float d = ld(dy, r * D + j);
      dg += d * (ld(x, r * D + j) - mean[r]) * rstd[r];
      db += d;
    }
    st(dgamma, j, dg);
    st(dbeta, j, db);
  }
}

std::unique_ptr<Kernel> prepare_layer_norm(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(3, 3, 3, 3);
  const tdm_dtype t = c.dtype(0, kF32Bf16);
  const Dims x = c.in(0).dims;
  if (x.empty()) c.fail("x must have rank >= 1");
  const int64_t D = x.back(), rows = D == 0 ? 0 : numel(x) / D;
  c.in_is(1, t, {D});
  c.in_is(2, t, {D});
  c.out_is(0, t, x);
  const Dims stat(x.begin(), x.end() - 1);
  c.out_is(1, TDM_F32, stat);
  c.out_is(2, TDM_F32, stat);
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

std::unique_ptr<Kernel> prepare_layer_norm_grad(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(5, 5, 3, 3);
  const tdm_dtype t = c.dtype(0, kF32Bf16);
  const Dims x = c.in(0).dims;
  if (x.empty()) c.fail("dy must have rank >= 1");
  const int64_t D = x.back(), rows = D == 0 ? 0 : numel(x) / D;
  const Dims stat(x.begin(), x.end() - 1);
  c.in_is(1, t, x);
  c.in_is(2, t, {D});
  c.in_is(3, TDM_F32, stat);
  c.in_is(4, TDM_F32, stat);
  c.out_is(0, t, x);
  c.out_is(1, t, {D});
  c.out_is(2, t, {D});
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel("layer_norm_grad", [=](CudaStream& s, void* const* in, void* const* o, void*) {
      const auto *dy = static_cast<const T*>(in[0]), *xx = static_cast<const T*>(in[1]);
      const auto *mean = static_cast<const float*>(in[3]), *rstd = static_cast<const float*>(in[4]);
      if (rows > 0)
        layer_norm_dx_kernel<T><<<unsigned(rows), kBlock, 0, s.get()>>>(dy, xx, static_cast<const T*>(in[2]),
                                                                        mean, rstd, static_cast<T*>(o[0]), D);
      if (D > 0)
        layer_norm_dparams_kernel<T><<<grid_for(D), kThreads, 0, s.get()>>>(
            dy, xx, mean, rstd, static_cast<T*>(o[1]), static_cast<T*>(o[2]), rows, D);
    });
  });
  return k;
}

// ---- batch norm: x seen as [N, C, L] --------------------------------------

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
  stats(
      x, M, [&](int64_t j) { return bn_index(b, c, j); }, b.eps, scratch, mean, var);
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
  if (x.size() < 2) c.fail("x must be [N, C, ...]");
  Bn b{x[0], x[1], 1, static_cast<float>(c.op().float_attr("epsilon", 1e-5)),
       static_cast<float>(c.op().float_attr("momentum", 0.1))};
  for (size_t k = 2; k < x.size(); ++k) b.L *= x[k];
  return b;
}

std::unique_ptr<Kernel> prepare_bn_train(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(5, 5, 5, 5);
  c.dtype(0, kF32);
  const Dims x = c.in(0).dims;
  const Bn b = bn_of(c, x);
  for (size_t i = 1; i < 5; ++i) c.in_is(i, TDM_F32, {b.C});
  c.out_is(0, TDM_F32, x);
  for (size_t j = 1; j < 5; ++j) c.out_is(j, TDM_F32, {b.C});
  return make_kernel("batch_norm_train", [=](CudaStream& s, void* const* in, void* const* o, void*) {
    if (b.C == 0 || b.N * b.L == 0) return;
    auto f = [&](void* p) { return static_cast<float*>(p); };
    bn_train_kernel<<<unsigned(b.C), kBlock, 0, s.get()>>>(f(in[0]), f(in[1]), f(in[2]), f(in[3]), f(in[4]),
                                                           f(o[0]), f(o[1]), f(o[2]), f(o[3]), f(o[4]), b);
  });
}

std::unique_ptr<Kernel> prepare_bn_infer(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(5, 5, 1, 1);
  c.dtype(0, kF32);
  const Dims x = c.in(0).dims;
  const Bn b = bn_of(c, x);
  for (size_t i = 1; i < 5; ++i) c.in_is(i, TDM_F32, {b.C});
  c.out_is(0, TDM_F32, x);
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
  c.counts(5, 5, 3, 3);
  c.dtype(0, kF32);
  const Dims x = c.in(0).dims;
  const Bn b = bn_of(c, x);
  c.in_is(1, TDM_F32, x);
  for (size_t i = 2; i < 5; ++i) c.in_is(i, TDM_F32, {b.C});
  c.out_is(0, TDM_F32, x);
  c.out_is(1, TDM_F32, {b.C});
  c.out_is(2, TDM_F32, {b.C});
  return make_kernel("batch_norm_grad", [=](CudaStream& s, void* const* in, void* const* o, void*) {
    if (b.C == 0 || b.N * b.L == 0) return;
    auto f = [&](void* p) { return static_cast<float*>(p); };
    bn_grad_kernel<<<unsigned(b.C), kBlock, 0, s.get()>>>(f(in[0]), f(in[1]), f(in[2]), f(in[3]), f(in[4]),
                                                          f(o[0]), f(o[1]), f(o[2]), b);
  });
}

}  // namespace

void register_norm(const Registrar& add) {
  add("layer_norm", prepare_layer_norm);
  add("layer_norm_grad", prepare_layer_norm_grad);
  add("batch_norm_train", prepare_bn_train);
  add("batch_norm_inference", prepare_bn_infer);
  add("batch_norm_grad", prepare_bn_grad);
}

}  // namespace tandem::cuda
