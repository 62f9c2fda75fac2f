// The CUDA plugin's kernels that the deterministic reductions replaced, kept
// here only so bench/gpu_kernels.cu can time the new ones against them (as
// they were at commit 6e47860: `git show 6e47860:plugins/cuda/ops/layer_norm.cu`,
// `rms_norm.cu`, `activation.cu`, `embedding.cu`).
#ifndef TANDEM_BENCH_GPU_KERNELS_BASELINE_CUH
#define TANDEM_BENCH_GPU_KERNELS_BASELINE_CUH

#include <algorithm>

#include "ops/kernels.cuh"

namespace tandem::cuda::baseline {

// One thread per column over every row.
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

// A block of 32 columns x 8 thread rows per 32 columns: D / 32 blocks.
constexpr int kCols = 32, kRowSplit = 8;

template <class T>
__global__ void rms_norm_dgamma_kernel(const T* dy, const T* x, const float* rstd, T* dgamma, int64_t rows,
                                       int64_t D) {
  __shared__ float partial[kRowSplit][kCols + 1];
  const int64_t j = blockIdx.x * int64_t(kCols) + threadIdx.x;
  float acc = 0.0f;
  if (j < D)
    for (int64_t r = threadIdx.y; r < rows; r += kRowSplit)
      acc += ld(dy, r * D + j) * ld(x, r * D + j) * rstd[r];
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || j >= D) return;
  float sum = 0.0f;
  for (int k = 0; k < kRowSplit; ++k) sum += partial[k][threadIdx.x];
  st(dgamma, j, sum);
}

// One block per channel; threads stride over its outer·inner elements.
template <class T>
__global__ void channel_sum_kernel(const T* dy, T* dbias, int64_t outer, int64_t channels, int64_t inner) {
  __shared__ float scratch[32];
  const int64_t c = blockIdx.x;
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < outer * inner; j += blockDim.x) {
    const int64_t o = j / inner, i = j % inner;
    acc += ld(dy, (o * channels + c) * inner + i);
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) st(dbias, c, acc);
}

// After zeroing dtable: thread (j, bucket) scans every index and adds the
// rows v with v % buckets == bucket.
__global__ void embedding_grad_kernel(const float* dy, const int32_t* idx, float* dtable, int64_t n,
                                      int64_t V, int64_t D, int64_t padding, int64_t buckets, int64_t shift) {
  TDM_GRID_STRIDE(t, D * buckets) {
    const int64_t j = t % D, bucket = t / D;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = idx[i] - shift;
      if (row < 0 || row >= V || row == padding || row % buckets != bucket) continue;
      dtable[row * D + j] += dy[i * D + j];
    }
  }
}

inline cudaError_t launch_embedding_grad(const float* dy, const int32_t* idx, float* dtable, int64_t n,
                                         int64_t V, int64_t D, cudaStream_t stream) {
  const cudaError_t zeroed = cudaMemsetAsync(dtable, 0, static_cast<size_t>(V * D) * sizeof(float), stream);
  if (zeroed != cudaSuccess) return zeroed;
  const int64_t buckets =
      std::max<int64_t>(1, std::min<int64_t>(V, (int64_t(1) << 16) / std::max<int64_t>(1, D)));
  embedding_grad_kernel<<<grid_for(D * buckets), kThreads, 0, stream>>>(dy, idx, dtable, n, V, D, -1, buckets,
                                                                        0);
  return cudaGetLastError();
}

}  // namespace tandem::cuda::baseline

#endif  // TANDEM_BENCH_GPU_KERNELS_BASELINE_CUH
