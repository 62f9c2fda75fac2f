// Reference backend — the device's prepare and the backend's one device.
#include "device.hpp"

#include <string>

#include "ops/common.hpp"

namespace tandem::reference {

std::unique_ptr<Kernel> ReferenceDevice::prepare(const OpView& op, size_t& workspace_bytes) {
  // Reference kernels keep their scratch in ordinary vectors: workspace 0.
  return registry().prepare(op, workspace_bytes);
}

Device& ReferenceBackend::device(uint32_t index) {
  if (index != 0)
    throw Error(TDM_INVALID_ARGUMENT, "reference: device index " + std::to_string(index) +
                                          " does not exist (the reference backend has 1 device)");
  return device_;
}

}  // namespace tandem::reference
