// CUDA backend — which GPUs this build of the plugin can run on, in plain
// C++ (no CUDA header) so the rule is unit-tested without a GPU.
#ifndef TANDEM_CUDA_GPU_SUPPORT_HPP
#define TANDEM_CUDA_GPU_SUPPORT_HPP

#include <string>

namespace tandem::cuda {

// Why GPU `index` (`name`, compute capability major.minor) cannot run this
// plugin's kernels, built for `architectures` (CMake's list, e.g.
// "75-real,...,120-virtual") whose oldest is `min_arch` (e.g. 75; 0: not
// known, nothing refused); empty when it can. A GPU newer than every
// architecture runs the PTX the build includes, compiled by the driver.
std::string unsupported_gpu_reason(int index, const std::string& name, int major, int minor, int min_arch,
                                   const std::string& architectures);

// The PCI address of a GPU as NVML and nvidia-smi write it
// ("00000000:17:00.0"), from cudaDeviceProp's pciDomainID, pciBusID and
// pciDeviceID: how NVML finds the GPU CUDA calls `index`, whatever
// CUDA_VISIBLE_DEVICES renumbered.
std::string pci_bus_id(int domain, int bus, int device);

}  // namespace tandem::cuda

#endif
