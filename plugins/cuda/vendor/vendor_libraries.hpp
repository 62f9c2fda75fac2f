// cuBLAS and cuDNN, opened by soname when the first GPU is opened, not when
// the plugin is loaded (sdk/ABI.md rule 24): every `tandem` command loads
// this plugin, and linking them would cost each one ~200 MB and 60 ms, on
// machines without a GPU too. The plugin links their headers only;
// cublas.hpp and cudnn.hpp route each call through the opened library
// (TANDEM_VENDOR_FN).
#ifndef TANDEM_CUDA_VENDOR_LIBRARIES_HPP
#define TANDEM_CUDA_VENDOR_LIBRARIES_HPP

#include "tandem/vendor_library.hpp"

namespace tandem::cuda {

VendorLibrary& cublas_library();
VendorLibrary& cudnn_library();

// Opens both (device open): tandem::Error(TDM_UNAVAILABLE) naming the files
// tried when one is missing.
void load_vendor_libraries();

}  // namespace tandem::cuda

#endif
