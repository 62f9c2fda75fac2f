#include "program/device_select.hpp"

#include <algorithm>

namespace tandem::host::program {
namespace {

// Lower is preferred when nothing is named.
int rank(const DeviceInfo& d) {
  if (d.kind == TDM_DEVICE_GPU) return 0;
  if (d.backend == "onednn") return 1;
  if (d.backend == "reference") return 3;
  return 2;
}

}  // namespace

Result<DeviceHandle> select_device(const PluginRegistry& registry, const std::string& wanted,
                                   int local_rank) {
  std::vector<DeviceInfo> all;
  std::string absent;
  for (const BackendDevices& b : enumerate_devices(registry)) {
    all.insert(all.end(), b.devices.begin(), b.devices.end());
    if (!b.no_device_reason.empty()) absent += "; " + b.backend + ": no device (" + b.no_device_reason + ")";
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const DeviceInfo& a, const DeviceInfo& b) { return rank(a) < rank(b); });
  const auto matches = [&](const DeviceInfo& d) {
    if (wanted.empty()) return true;
    if (wanted == "cpu") return d.kind == TDM_DEVICE_CPU;
    if (wanted == "gpu") return d.kind == TDM_DEVICE_GPU;
    return d.id == wanted ||
           (wanted.find(':') == std::string::npos && d.backend == wanted && d.id == wanted + ":0");
  };
  auto it = std::find_if(all.begin(), all.end(), matches);
  // One GPU per process of a node: without an index, the local rank picks
  // among the matching GPUs (as torchrun's LOCAL_RANK convention).
  const bool indexed = wanted.find(':') != std::string::npos;
  if (it != all.end() && it->kind == TDM_DEVICE_GPU && !indexed && local_rank > 0) {
    std::vector<const DeviceInfo*> gpus;
    for (const DeviceInfo& d : all)
      if (d.kind == TDM_DEVICE_GPU && d.backend == it->backend) gpus.push_back(&d);
    const DeviceInfo* chosen = gpus[static_cast<size_t>(local_rank) % gpus.size()];
    it = all.begin() + (chosen - all.data());
  }
  if (it == all.end()) {
    std::string known;
    for (const auto& d : all) known += (known.empty() ? "" : ", ") + d.id;
    return make_error("no device matches '" + (wanted.empty() ? std::string("any") : wanted) +
                          "'; available: " + (known.empty() ? std::string("none") : known) + absent +
                          " (see 'tandem devices')",
                      TDM_NOT_FOUND);
  }
  const size_t colon = it->id.rfind(':');
  const LoadedPlugin* backend = registry.find(it->backend);
  return DeviceHandle::open(*backend, static_cast<uint32_t>(std::stoul(it->id.substr(colon + 1))));
}

}  // namespace tandem::host::program
