// CUDA backend — softmax, log_softmax and their gradients along any axis.
// One block per row (a row is the `n` elements along the axis, `inner`
// apart); f32 throughout. Gradient math is in math/softmax.hpp (tested on
// the CPU).
#include "math/softmax.hpp"
#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

constexpr int kRowThreads = 256;

struct Rows {
  int64_t outer, n, inner;
};

__device__ __forceinline__ int64_t row_base(const Rows& r, int64_t row) {
  return (row / r.inner) * r.n * r.inner + row % r.inner;
}

template <bool kLog>
__global__ void softmax_kernel(const float* x, float* y, Rows r) {
  __shared__ float scratch[32];
  const int64_t base = row_base(r, blockIdx.x);
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < r.n; j += blockDim.x) m = fmaxf(m, x[base + j * r.inner]);
  m = block_max(m, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < r.n; j += blockDim.x) sum += expf(x[base + j * r.inner] - m);
  sum = block_sum(sum, scratch);
  const float lse = logf(sum);
  for (int64_t j = threadIdx.x; j < r.n; j += blockDim.x) {
    const float z = x[base + j * r.inner] - m;
    y[base + j * r.inner] = kLog ? z - lse : expf(z) / sum;
  }
}

template <bool kLog>
__global__ void softmax_grad_kernel(const float* dy, const float* y, float* dx, Rows r) {
  __shared__ float scratch[32];
  const int64_t base = row_base(r, blockIdx.x);
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < r.n; j += blockDim.x) {
    const int64_t k = base + j * r.inner;
    acc += kLog ? dy[k] : dy[k] * y[k];
  }
  acc = block_sum(acc, scratch);
  for (int64_t j = threadIdx.x; j < r.n; j += blockDim.x) {
    const int64_t k = base + j * r.inner;
    dx[k] = kLog ? math::log_softmax_grad(dy[k], y[k], acc) : math::softmax_grad(dy[k], y[k], acc);
  }
}

Rows rows_of(const Check& c, const Dims& d) {
  const size_t axis = c.axis(c.op().int_attr("axis", -1), d.size());
  Rows r{1, d[axis], 1};
  for (size_t k = 0; k < axis; ++k) r.outer *= d[k];
  for (size_t k = axis + 1; k < d.size(); ++k) r.inner *= d[k];
  decline_if(c, one_block_per_limit(r.outer * r.inner, "row"));
  return r;
}

template <bool kLog>
std::unique_ptr<Kernel> prepare_softmax(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.primary_dtype(0, kF32);
  const Rows r = rows_of(c, c.in(0).dims);
  return make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
    if (r.outer * r.inner == 0 || r.n == 0) return;
    softmax_kernel<kLog><<<unsigned(r.outer * r.inner), kRowThreads, 0, s.get()>>>(
        static_cast<const float*>(in[0]), static_cast<float*>(o[0]), r);
  });
}

template <bool kLog>
std::unique_ptr<Kernel> prepare_softmax_grad(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.primary_dtype(0, kF32);
  const Rows r = rows_of(c, c.in(0).dims);
  return make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
    if (r.outer * r.inner == 0 || r.n == 0) return;
    softmax_grad_kernel<kLog><<<unsigned(r.outer * r.inner), kRowThreads, 0, s.get()>>>(
        static_cast<const float*>(in[0]), static_cast<const float*>(in[1]), static_cast<float*>(o[0]), r);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("softmax", prepare_softmax<false>);
  r.add("log_softmax", prepare_softmax<true>);
  r.add("softmax_grad", prepare_softmax_grad<false>);
  r.add("log_softmax_grad", prepare_softmax_grad<true>);
});

}  // namespace

}  // namespace tandem::cuda
