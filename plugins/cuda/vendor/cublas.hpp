// cuBLAS for the plugin's code: its header, and each function the plugin
// calls routed through the library opened at device open
// (vendor_libraries.hpp). Include this, never <cublas_v2.h> directly: a
// call this file does not route would need libcublas at link time, which
// the plugin's link (-Wl,--no-undefined, no -lcublas) refuses.
#ifndef TANDEM_CUDA_VENDOR_CUBLAS_HPP
#define TANDEM_CUDA_VENDOR_CUBLAS_HPP

#include <cublas_v2.h>

#include "vendor/vendor_libraries.hpp"

// cublas_v2.h maps cublasCreate to cublasCreate_v2 (and so on): the _v2
// names are the library's symbols.
#define cublasCreate_v2(...) TANDEM_VENDOR_FN(::tandem::cuda::cublas_library(), cublasCreate_v2)(__VA_ARGS__)
#define cublasDestroy_v2(...) \
  TANDEM_VENDOR_FN(::tandem::cuda::cublas_library(), cublasDestroy_v2)(__VA_ARGS__)
#define cublasSetStream_v2(...) \
  TANDEM_VENDOR_FN(::tandem::cuda::cublas_library(), cublasSetStream_v2)(__VA_ARGS__)
#define cublasSetWorkspace_v2(...) \
  TANDEM_VENDOR_FN(::tandem::cuda::cublas_library(), cublasSetWorkspace_v2)(__VA_ARGS__)
#define cublasSetMathMode(...) \
  TANDEM_VENDOR_FN(::tandem::cuda::cublas_library(), cublasSetMathMode)(__VA_ARGS__)
#define cublasGetStatusString(...) \
  TANDEM_VENDOR_FN(::tandem::cuda::cublas_library(), cublasGetStatusString)(__VA_ARGS__)
// cublas_api.h adds a C++ overload taking a cudaDataType compute type.
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                                      int, int, int, const void*, const void*, cudaDataType,
                                                      int, long long, const void*, cudaDataType, int,
                                                      long long, const void*, void*, cudaDataType, int,
                                                      long long, int, cublasComputeType_t, cublasGemmAlgo_t);
#define cublasGemmStridedBatchedEx(...)                                             \
  TANDEM_VENDOR_FN_AS(::tandem::cuda::cublas_library(), cublasGemmStridedBatchedEx, \
                      CublasGemmStridedBatchedEx)                                   \
  (__VA_ARGS__)

#endif
