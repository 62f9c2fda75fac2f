// NVML, the driver's management library, for one thing: a GPU's free
// memory without a CUDA context. cudaMemGetInfo creates this process's
// context on the GPU it asks about (some 500 MB of GPU memory and a
// slot in nvidia-smi), so `tandem devices` or choosing a device would
// otherwise put a context from every rank on every GPU of a node.
// libnvidia-ml.so.1 comes with the driver; it is opened by soname on the
// first question, and where it is missing the caller falls back to CUDA.
#ifndef TANDEM_CUDA_VENDOR_NVML_HPP
#define TANDEM_CUDA_VENDOR_NVML_HPP

#include <cstdint>
#include <optional>
#include <string>

namespace tandem::cuda {

struct NvmlMemory {
  uint64_t total = 0, free = 0;
};

// The memory of the GPU at PCI address `pci_bus_id` ("0000:17:00.0", see
// pci_bus_id in gpu_support.hpp) as NVML reports it, whatever process
// uses it; nullopt when NVML cannot be opened or does not know the GPU.
std::optional<NvmlMemory> nvml_memory(const std::string& pci_bus_id);

}  // namespace tandem::cuda

#endif
