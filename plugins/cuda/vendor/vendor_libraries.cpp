#include "vendor/vendor_libraries.hpp"

#include <cublas_api.h>
#include <cudnn_version.h>

#define TANDEM_TEXT(x) #x
#define TANDEM_SONAME(stem, major) "lib" stem ".so." TANDEM_TEXT(major)

namespace tandem::cuda {
namespace {

// After the loader's own search: the toolkit this plugin was built against,
// for a build tree whose toolkit the loader does not know (a package
// build sets none: there the system's library paths decide).
std::vector<std::string> fallback_dirs() {
#ifdef TANDEM_CUDA_FALLBACK_LIBRARY_DIR
  return {TANDEM_CUDA_FALLBACK_LIBRARY_DIR};
#else
  return {};
#endif
}

}  // namespace

VendorLibrary& cublas_library() {
  static VendorLibrary library("cuBLAS", {TANDEM_SONAME("cublas", CUBLAS_VER_MAJOR)}, fallback_dirs());
  return library;
}

VendorLibrary& cudnn_library() {
  static VendorLibrary library("cuDNN", {TANDEM_SONAME("cudnn", CUDNN_MAJOR)}, fallback_dirs());
  return library;
}

void load_vendor_libraries() {
  cublas_library().load();
  cudnn_library().load();
}

}  // namespace tandem::cuda
