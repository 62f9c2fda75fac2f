// CUDA backend — device-side helpers shared by the .cu op files: typed
// element access, dtype dispatch, broadcasting index maps, block reductions.
#ifndef TANDEM_CUDA_OPS_KERNELS_CUH
#define TANDEM_CUDA_OPS_KERNELS_CUH

#include <cuda_runtime.h>

#include "cuda_common.hpp"
#include "launch_limits.hpp"
#include "math/common.hpp"

namespace tandem::cuda {

using math::bf16_t;
using math::f16_t;

// Element load/store through f32 for floating storage types.
template <class T>
__device__ __forceinline__ float ld(const T* p, int64_t i) {
  return math::to_float(p[i]);
}
template <class T>
__device__ __forceinline__ void st(T* p, int64_t i, float v) {
  p[i] = math::from_float<T>(v);
}

// Calls f(T{}) with the storage type of a floating dtype (f32, bf16, f16).
template <class F>
void dispatch_float(tdm_dtype dtype, F&& f) {
  switch (dtype) {
    case TDM_F32:
      f(float{});
      break;
    case TDM_BF16:
      f(bf16_t{});
      break;
    case TDM_F16:
      f(f16_t{});
      break;
    default:
      throw Unsupported(std::string("cuda plugin: dtype ") + dtype_name(dtype) + " is not implemented");
  }
}

// Up to 8 dimensions, passed by value to kernels.
constexpr int kMaxRank = 8;
struct Shape8 {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};  // of the operand, 0 on broadcast dimensions
};

// Maps a linear index of the output (dims in `out`) to an operand's offset.
__device__ __forceinline__ int64_t offset_of(int64_t linear, const Shape8& out, const Shape8& operand) {
  int64_t off = 0;
  for (int d = out.rank - 1; d >= 0; --d) {
    const int64_t i = linear % out.dims[d];
    linear /= out.dims[d];
    off += i * operand.strides[d];
  }
  return off;
}

// Block-wide sum of one float per thread; every thread gets the result.
// `scratch` holds 32 floats in shared memory. blockDim.x is a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Threads per block of the block-per-row (or per-channel) kernels.
constexpr int kBlock = 256;

// Mean and biased variance of the n values x[f(j)], j < n, two-pass (mean
// first, then Σ(x - mean)²); every thread of the block gets them. `scratch`
// as for block_sum.
template <class T, class Index>
__device__ void block_mean_var(const T* x, int64_t n, Index f, float* scratch, float& mean, float& var) {
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += ld(x, f(j));
  mean = block_sum(s, scratch) / static_cast<float>(n);
  float q = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float d = ld(x, f(j)) - mean;
    q += d * d;
  }
  var = block_sum(q, scratch) / static_cast<float>(n);
}

#define TDM_GRID_STRIDE(i, n)                                               \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

}  // namespace tandem::cuda

#endif  // TANDEM_CUDA_OPS_KERNELS_CUH
