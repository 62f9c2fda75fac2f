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

// The GPU of local rank `group.local_rank` among `gpus` (one backend's, in
// index order), or why the node's ranks cannot each have their own.
Result<const DeviceInfo*> gpu_of_rank(const std::vector<const DeviceInfo*>& gpus, const DeviceInfo& named,
                                      bool indexed, const ProcessGroup& group) {
  const size_t n = gpus.size();
  const int local = std::max(group.local_rank, group.local_world > 0 ? group.local_world - 1 : 0);
  if (group.world <= 1 || n <= 1) return &named;  // one process, or one visible GPU per process
  std::string list;
  for (const DeviceInfo* g : gpus) list += (list.empty() ? "" : ", ") + g->id;
  if (indexed && group.local_world > 1)
    return make_error("--device " + named.id + ": every one of the " + std::to_string(group.local_world) +
                          " processes on this node would use " + named.id +
                          "; name the backend alone (--device " + named.backend +
                          ") so that local rank r takes GPU r, or give each process its own GPU with "
                          "CUDA_VISIBLE_DEVICES",
                      TDM_INVALID_ARGUMENT);
  if (indexed) return &named;
  if (size_t(local) >= n)
    return make_error(
        std::to_string(std::max(group.local_world, group.local_rank + 1)) + " processes on this node but " +
            std::to_string(n) + " GPUs (" + list + "): start at most " + std::to_string(n) +
            " processes per node (mpirun --npernode " + std::to_string(n) +
            ", srun --ntasks-per-node=" + std::to_string(n) +
            "), one per GPU; two processes on one GPU would share its memory and NCCL refuses them",
        TDM_INVALID_ARGUMENT);
  return gpus[size_t(group.local_rank)];
}

}  // namespace

Result<DeviceHandle> select_device(const PluginRegistry& registry, const std::string& wanted,
                                   const ProcessGroup& group) {
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
  if (it != all.end() && it->kind == TDM_DEVICE_GPU) {
    std::vector<const DeviceInfo*> gpus;
    for (const DeviceInfo& d : all)
      if (d.kind == TDM_DEVICE_GPU && d.backend == it->backend) gpus.push_back(&d);
    auto chosen = gpu_of_rank(gpus, *it, wanted.find(':') != std::string::npos, group);
    if (!chosen) return chosen.error();
    it = all.begin() + (*chosen - all.data());
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
