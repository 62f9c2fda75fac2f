#include "gpu_support.hpp"

#include <cstdio>

namespace tandem::cuda {

std::string unsupported_gpu_reason(int index, const std::string& name, int major, int minor, int min_arch,
                                   const std::string& architectures) {
  const int arch = major * 10 + minor;
  if (min_arch <= 0 || arch >= min_arch) return "";
  return "GPU " + std::to_string(index) + " (" + name + ") has compute capability " + std::to_string(major) +
         "." + std::to_string(minor) + ", older than the oldest this cuda plugin is built for (" +
         std::to_string(min_arch / 10) + "." + std::to_string(min_arch % 10) + "; built for " +
         architectures +
         "); CUDA 13 supports nothing before 7.5: train on another GPU or on the CPU (--device onednn)";
}

std::string pci_bus_id(int domain, int bus, int device) {
  char text[32];
  std::snprintf(text, sizeof text, "%08x:%02x:%02x.0", static_cast<unsigned>(domain),
                static_cast<unsigned>(bus), static_cast<unsigned>(device));
  return text;
}

}  // namespace tandem::cuda
