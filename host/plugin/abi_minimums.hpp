// The smallest struct_size a plugin built against SDK 1.0 writes, for every
// table the host receives (sdk/ABI.md rule 4: accept any size >= the minimum,
// read only the fields that fit). Each is the size up to the last field
// that ABI 1.0 had; fields marked "since ABI 1.1" come after it.
#pragma once

#include <cstddef>

#include "tandem/plugin.h"

namespace tandem::host::abi10 {

inline constexpr size_t kPluginSize = TDM_STRUCT_SIZE(tdm_plugin, comm);
inline constexpr size_t kVendorVersionSize = TDM_STRUCT_SIZE(tdm_vendor_version, version);
inline constexpr size_t kBackendApiSize = TDM_STRUCT_SIZE(tdm_backend_api, kernel_release);
inline constexpr size_t kFeatureApiSize = TDM_STRUCT_SIZE(tdm_feature_api, on_step_end);
inline constexpr size_t kCommApiSize = TDM_STRUCT_SIZE(tdm_comm_api, barrier);
inline constexpr size_t kDeviceInfoSize = TDM_STRUCT_SIZE(tdm_device_info, host_addressable);
inline constexpr size_t kOpDescSize = TDM_STRUCT_SIZE(tdm_op_desc, n_outputs);

}  // namespace tandem::host::abi10
