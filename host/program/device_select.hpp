// Choosing the device a run uses: "--device" names one ("cuda:0",
// "onednn:0", "reference"), or an alias ("cpu", "gpu"); without it Tandem
// picks the fastest available: a GPU backend first, then onednn, then
// reference, then any other backend with a device.
#pragma once

#include <string>

#include "device/device.hpp"
#include "plugin/registry.hpp"
#include "util/result.hpp"

namespace tandem::host::program {

// `local_rank`: this process's place among the processes of its node; a GPU
// named without an index ("gpu", "cuda", or nothing) is the local_rank-th.
Result<DeviceHandle> select_device(const PluginRegistry& registry, const std::string& wanted,
                                   int local_rank = 0);

}  // namespace tandem::host::program
