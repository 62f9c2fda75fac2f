// CUDA backend — the plugin entry point (the one exported symbol) and the
// vendor library versions shown by `tandem plugins`.
#include <cublas_api.h>
#include <cudnn_version.h>

#include <string>

#include "device.hpp"

namespace {

std::string dotted(int v, int major_div, int minor_div) {
  return std::to_string(v / major_div) + "." + std::to_string((v % major_div) / minor_div);
}

tandem::PluginInfo info() {
  tandem::PluginInfo i{
      "cuda", "0.1.0", "NVIDIA GPUs: cuBLAS GEMMs, cuDNN convolutions, own CUDA kernels for the rest", {}};
  // The runtime is linked statically (asking its version needs no driver);
  // cuBLAS and cuDNN are opened only when a GPU is (vendor/): these are the
  // versions the plugin was built against, whose sonames it opens.
  int runtime = 0;
  i.vendors.emplace_back(
      "CUDA runtime", cudaRuntimeGetVersion(&runtime) == cudaSuccess ? dotted(runtime, 1000, 10) : "unknown");
  i.vendors.emplace_back("cuBLAS", std::to_string(CUBLAS_VER_MAJOR) + "." + std::to_string(CUBLAS_VER_MINOR) +
                                       "." + std::to_string(CUBLAS_VER_PATCH));
  i.vendors.emplace_back("cuDNN", std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + "." +
                                      std::to_string(CUDNN_PATCHLEVEL));
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
