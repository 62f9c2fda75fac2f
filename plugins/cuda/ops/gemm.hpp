// CUDA backend — one (batched) row-major GEMM on cuBLAS
// (cublasGemmStridedBatchedEx, f32 accumulation for every dtype), shared by
// matmul.cpp and linear.cpp, and the per-stream cuBLAS handle.
//
// Row-major C = op(A)·op(B) is computed as column-major Cᵀ = op(B)ᵀ·op(A)ᵀ,
// so cuBLAS sees B first and nothing is transposed in memory.
#ifndef TANDEM_CUDA_OPS_GEMM_HPP
#define TANDEM_CUDA_OPS_GEMM_HPP

#include <utility>
#include <vector>

#include "device.hpp"
#include "launch_limits.hpp"
#include "vendor/cublas.hpp"

namespace tandem::cuda {

// The stream's cuBLAS handle, created on its first use.
cublasHandle_t blas_handle(CudaStream& s);

// y[b] = op(a[b]) · op(b[b]), strides 0 for a broadcast operand.
struct Gemm {
  cudaDataType_t type = CUDA_R_32F;      // a and b
  cudaDataType_t out_type = CUDA_R_32F;  // y: type, or f32 over bf16/f16 (a wide output)
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  bool ta = false, tb = false;
  int64_t M = 0, N = 0, K = 0, batch = 1, stride_a = 0, stride_b = 0;
  // 1: y = op(a)·op(b) + y, y holding an addend when run is called.
  float beta = 0.0f;

  // Batch dims that broadcast partially ([2,1] against [1,3]) cannot be one
  // strided call: then `offsets` holds each output batch's (a, b) element
  // offsets, resolved in prepare, and run issues one GEMM per batch.
  std::vector<std::pair<int64_t, int64_t>> offsets;
  int64_t elem = 4, out_elem = 4;  // bytes per element of a and b, of y
  // cuBLAS's workspace, taken from the kernel's planned workspace (prepare
  // reports it) rather than allocated by cuBLAS behind the plan's back.
  size_t workspace_bytes = 0;

  // On stream s through its cuBLAS handle, with `workspace` (of
  // workspace_bytes) as cuBLAS's; y = 0 (beta 0) or unchanged when K = 0.
  void run(CudaStream& s, const void* a, const void* b, void* y, void* workspace) const;
  void call(cublasHandle_t h, const void* a, const void* b, void* y, int64_t count) const;
};

// An unbatched GEMM of operands of dtype t into y of dtype `out` (t, or
// f32 over bf16/f16: the f32 accumulators written as they are), TF32 for
// f32 when the device allows it; Unsupported for dimensions of 2^31 or more
// (launch_limits.hpp).
Gemm make_gemm(CudaDevice& d, tdm_dtype t, bool ta, bool tb, int64_t M, int64_t N, int64_t K);
Gemm make_gemm(CudaDevice& d, tdm_dtype t, tdm_dtype out, bool ta, bool tb, int64_t M, int64_t N, int64_t K);

}  // namespace tandem::cuda

#endif  // TANDEM_CUDA_OPS_GEMM_HPP
