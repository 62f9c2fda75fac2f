// CUDA backend — the op registry: every section of sdk/ops.md this backend
// implements, each registered by its own ops/<stem>.cu or .cpp.
#include "cuda_common.hpp"

namespace tandem::cuda {

SectionList<Registry>& sections() {
  static SectionList<Registry> list;
  return list;
}

const Registry& registry() {
  static const Registry r = sections().build("cuda");
  return r;
}

}  // namespace tandem::cuda
