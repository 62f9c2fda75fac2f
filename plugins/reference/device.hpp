// Reference backend — the one CPU device "reference:0".
//
// Memory, statistics and device info come from the SDK's HostMemoryDevice
// (host memory, 64-byte aligned); streams and events keep tandem.hpp's
// synchronous defaults: every kernel runs to completion inside kernel_launch.
#ifndef TANDEM_REFERENCE_DEVICE_HPP
#define TANDEM_REFERENCE_DEVICE_HPP

#include "tandem/host_device.hpp"

namespace tandem::reference {

class ReferenceDevice final : public HostMemoryDevice {
 public:
  ReferenceDevice() : HostMemoryDevice("reference:0") {}
  std::unique_ptr<Kernel> prepare(const OpView& op, size_t& workspace_bytes) override;
};

class ReferenceBackend final : public Backend {
 public:
  uint32_t device_count() override { return 1; }
  Device& device(uint32_t index) override;

 private:
  ReferenceDevice device_;
};

}  // namespace tandem::reference

#endif  // TANDEM_REFERENCE_DEVICE_HPP
