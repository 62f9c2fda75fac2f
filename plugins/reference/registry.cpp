// Reference backend — the op registry: every section of sdk/ops.md, each
// registered by its own ops/<stem>.cpp.
#include "ops/common.hpp"

namespace tandem::reference {

SectionList<Registry>& sections() {
  static SectionList<Registry> list;
  return list;
}

const Registry& registry() {
  static const Registry r = sections().build("reference");
  return r;
}

}  // namespace tandem::reference
