#include "nccl_library.hpp"

#define TANDEM_TEXT(x) #x
#define TANDEM_SONAME(major) "libnccl.so." TANDEM_TEXT(major)

namespace tandem::nccl {

// After the loader's own search: the directory of the NCCL this plugin was
// built against, for a build tree (a package build sets none).
VendorLibrary& nccl_library() {
#ifdef TANDEM_NCCL_FALLBACK_LIBRARY_DIR
  static VendorLibrary library("NCCL", {TANDEM_SONAME(NCCL_MAJOR)}, {TANDEM_NCCL_FALLBACK_LIBRARY_DIR});
#else
  static VendorLibrary library("NCCL", {TANDEM_SONAME(NCCL_MAJOR)});
#endif
  return library;
}

}  // namespace tandem::nccl
