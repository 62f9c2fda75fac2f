// Reference backend — op registry: catalog name -> kernel factory.
//
// A factory validates the op description (counts, dtypes, shapes,
// attributes) and returns a ready kernel, or throws tandem::Unsupported /
// tandem::Error(TDM_INVALID_ARGUMENT). Names are resolved once, in prepare.
#ifndef TANDEM_REFERENCE_REGISTRY_HPP
#define TANDEM_REFERENCE_REGISTRY_HPP

#include <map>
#include <memory>
#include <string>

#include "ops/common.hpp"

namespace tandem::reference {

class Registry {
 public:
  // The registry of every op in the catalog; built on first use.
  static const Registry& instance();

  // Throws Unsupported for an unknown op name.
  std::unique_ptr<Kernel> prepare(const OpView& op, size_t& workspace) const;
  const std::map<std::string, Factory>& factories() const noexcept { return factories_; }

 private:
  Registry();
  std::map<std::string, Factory> factories_;
};

}  // namespace tandem::reference

#endif  // TANDEM_REFERENCE_REGISTRY_HPP
