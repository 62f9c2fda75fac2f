// CUDA backend — the plugin entry point (the one exported symbol) and the
// vendor library versions shown by `tandem plugins`.
#include <cublas_api.h>
#include <cudnn.h>

#include <string>

#include "device.hpp"

namespace {

std::string dotted(int v, int major_div, int minor_div) {
  return std::to_string(v / major_div) + "." + std::to_string((v % major_div) / minor_div);
}

tandem::PluginInfo info() {
  tandem::PluginInfo i{
      "cuda", "0.1.0", "NVIDIA GPUs: cuBLAS GEMMs, cuDNN convolutions, own CUDA kernels for the rest", {}};
  // None of these calls needs the driver: they work on a machine without one.
  int runtime = 0;
  i.vendors.emplace_back(
      "CUDA runtime", cudaRuntimeGetVersion(&runtime) == cudaSuccess ? dotted(runtime, 1000, 10) : "unknown");
  int blas_major = 0, blas_minor = 0, blas_patch = 0;
  cublasGetProperty(MAJOR_VERSION, &blas_major);
  cublasGetProperty(MINOR_VERSION, &blas_minor);
  cublasGetProperty(PATCH_LEVEL, &blas_patch);
  i.vendors.emplace_back("cuBLAS", std::to_string(blas_major) + "." + std::to_string(blas_minor) + "." +
                                       std::to_string(blas_patch));
  const size_t dnn = cudnnGetVersion();  // e.g. 91900 = 9.19.0
  i.vendors.emplace_back("cuDNN", std::to_string(dnn / 10000) + "." + std::to_string((dnn % 10000) / 100) +
                                      "." + std::to_string(dnn % 100));
  return i;
}

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  try {
    return tandem::backend_entry<tandem::cuda::CudaBackend>(host, major, minor, info());
  } catch (...) {  // info() allocates; nothing may escape a C entry point
    return nullptr;
  }
}
