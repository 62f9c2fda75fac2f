// Choosing the device a run uses: "--device" names one ("cuda:0",
// "onednn:0", "reference"), or an alias ("cpu", "gpu"); without it Tandem
// picks the fastest available: a GPU backend first, then onednn, then
// reference, then any other backend with a device.
#pragma once

#include <string>

#include "device/device.hpp"
#include "plugin/registry.hpp"
#include "program/process_group.hpp"
#include "util/result.hpp"

namespace tandem::host::program {

// `group`: the run's processes. A GPU named without an index ("gpu",
// "cuda", or nothing) is the local_rank-th of the node's GPUs. Several
// processes of a node on one GPU are refused before any communicator is
// made (NCCL would fail later, or the run would share the GPU): more local
// ranks than GPUs, or every local rank naming the same indexed GPU. (One
// visible GPU per process — CUDA_VISIBLE_DEVICES per rank — is each rank's
// own GPU 0.)
Result<DeviceHandle> select_device(const PluginRegistry& registry, const std::string& wanted,
                                   const ProcessGroup& group = {});

}  // namespace tandem::host::program
