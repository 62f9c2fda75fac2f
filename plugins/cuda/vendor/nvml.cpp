#include "vendor/nvml.hpp"

#include <mutex>

#include "tandem/vendor_library.hpp"

// NVML's C API as its reference manual documents it: the toolkit this
// plugin builds against ships no nvml.h (the driver's development package
// does), and these four functions have kept their _v2 signatures since
// NVML 5.
extern "C" {
using NvmlReturn = int;  // nvmlReturn_t: 0 is NVML_SUCCESS
struct NvmlDeviceSt;
struct NvmlMemoryV1 {  // nvmlMemory_t
  unsigned long long total, free, used;
};
using NvmlInit = NvmlReturn (*)();
using NvmlDeviceGetHandleByPciBusId = NvmlReturn (*)(const char*, NvmlDeviceSt**);
using NvmlDeviceGetMemoryInfo = NvmlReturn (*)(NvmlDeviceSt*, NvmlMemoryV1*);
}

namespace tandem::cuda {
namespace {

struct Nvml {
  NvmlDeviceGetHandleByPciBusId by_bus_id = nullptr;
  NvmlDeviceGetMemoryInfo memory_info = nullptr;
};

// NVML opened and initialised once; nullptr when it cannot be. Never shut
// down: the library stays mapped for the process (vendor_library.hpp).
const Nvml* nvml() {
  static VendorLibrary library("NVML", {"libnvidia-ml.so.1"});
  static Nvml api;
  static bool ready = false;
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      if (library.symbol<NvmlInit>("nvmlInit_v2")() != 0) return;
      api.by_bus_id = library.symbol<NvmlDeviceGetHandleByPciBusId>("nvmlDeviceGetHandleByPciBusId_v2");
      api.memory_info = library.symbol<NvmlDeviceGetMemoryInfo>("nvmlDeviceGetMemoryInfo");
      ready = true;
    } catch (const Error&) {
      // No NVML (a driver without it, a container that does not mount it):
      // the caller asks CUDA instead.
    }
  });
  return ready ? &api : nullptr;
}

}  // namespace

std::optional<NvmlMemory> nvml_memory(const std::string& pci_bus_id) {
  const Nvml* api = nvml();
  if (api == nullptr) return std::nullopt;
  NvmlDeviceSt* device = nullptr;
  NvmlMemoryV1 memory{};
  if (api->by_bus_id(pci_bus_id.c_str(), &device) != 0 || api->memory_info(device, &memory) != 0)
    return std::nullopt;
  return NvmlMemory{memory.total, memory.free};
}

}  // namespace tandem::cuda
