// CUDA backend — the cuBLAS GEMM (gemm.hpp).
#include "ops/gemm.hpp"

#include <string>

namespace tandem::cuda {

namespace {

void check_blas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(status == CUBLAS_STATUS_ALLOC_FAILED ? TDM_OUT_OF_MEMORY : TDM_INTERNAL,
                std::string("cuda plugin: ") + what + " failed: " + cublasGetStatusString(status));
}

cudaDataType_t data_type(tdm_dtype t) {
  return t == TDM_F32 ? CUDA_R_32F : t == TDM_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

}  // namespace

cublasHandle_t blas_handle(CudaStream& s) {
  if (s.blas == nullptr) {
    cublasHandle_t h = nullptr;
    check_blas(cublasCreate(&h), "cublasCreate");
    s.blas = h;
    s.blas_destroy = [](void* p) { cublasDestroy(static_cast<cublasHandle_t>(p)); };
    check_blas(cublasSetStream(h, s.get()), "cublasSetStream");
    // f16/bf16 GEMMs accumulate in f32 (the compute type) including any
    // split-K reduction, which cuBLAS may otherwise do in the inputs' dtype.
    // TF32 stays governed by the compute type make_gemm chose.
    check_blas(
        cublasSetMathMode(h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                       CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
        "cublasSetMathMode");
  }
  return static_cast<cublasHandle_t>(s.blas);
}

void Gemm::run(CudaStream& s, const void* a, const void* b, void* y, void* workspace) const {
  if (M == 0 || N == 0 || batch == 0) return;
  // A sum over nothing: y = 0. cuBLAS rejects K = 0 leading dimensions.
  if (K == 0) {
    if (beta == 0.0f)
      TDM_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<size_t>(batch * M * N * out_elem), s.get()));
    return;
  }
  cublasHandle_t h = blas_handle(s);
  check_blas(cublasSetWorkspace(h, workspace, workspace_bytes), "cublasSetWorkspace");
  if (offsets.empty()) return call(h, a, b, y, batch);
  for (size_t i = 0; i < offsets.size(); ++i)
    call(h, static_cast<const char*>(a) + offsets[i].first * elem,
         static_cast<const char*>(b) + offsets[i].second * elem,
         static_cast<char*>(y) + static_cast<int64_t>(i) * M * N * out_elem, 1);
}

void Gemm::call(cublasHandle_t h, const void* a, const void* b, void* y, int64_t count) const {
  const float alpha = 1.0f;
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  check_blas(cublasGemmStridedBatchedEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        int(N), int(M), int(K), &alpha, b, type, int(ldb), stride_b, a, type,
                                        int(lda), stride_a, &beta, y, out_type, int(N), M * N, int(count),
                                        compute, CUBLAS_GEMM_DEFAULT),
             "cublasGemmStridedBatchedEx");
}

Gemm make_gemm(CudaDevice& d, tdm_dtype t, bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  return make_gemm(d, t, t, ta, tb, M, N, K);
}

Gemm make_gemm(CudaDevice& d, tdm_dtype t, tdm_dtype out, bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  const bool tf32 = t == TDM_F32 && d.tf32();
  if (const std::string why = gemm_limit(M, N, K, 1); !why.empty()) throw Unsupported("cuda plugin: " + why);
  Gemm g;
  g.type = data_type(t);
  g.out_type = data_type(out);
  g.out_elem = static_cast<int64_t>(dtype_size(out));
  g.compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  g.ta = ta, g.tb = tb, g.M = M, g.N = N, g.K = K;
  g.elem = static_cast<int64_t>(dtype_size(t));
  d.on_new_stream([](CudaStream& s) { blas_handle(s); });
  // What cuBLAS itself allocates per handle by default: 32 MiB from Hopper
  // on, 4 MiB before (cuBLAS documentation, cublasSetWorkspace).
  g.workspace_bytes = K == 0 ? 0 : d.compute_major() >= 9 ? size_t(32) << 20 : size_t(4) << 20;
  return g;
}

}  // namespace tandem::cuda
