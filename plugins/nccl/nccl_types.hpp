// NCCL comm plugin — Tandem dtype and reduce-op codes mapped to NCCL's, and
// the GPU of a rank's communicator. Header-only and free of CUDA calls, so
// tests/nccl checks it without a GPU.
#ifndef TANDEM_NCCL_TYPES_HPP
#define TANDEM_NCCL_TYPES_HPP

#include <nccl.h>

#include <optional>

#include "tandem/comm.h"
#include "tandem/tandem.hpp"

namespace tandem::nccl {

inline std::optional<ncclDataType_t> nccl_type(tdm_dtype dtype) noexcept {
  switch (dtype) {
    case TDM_F32:
      return ncclFloat32;
    case TDM_F64:
      return ncclFloat64;
    case TDM_F16:
      return ncclFloat16;
    case TDM_BF16:
      return ncclBfloat16;
    case TDM_S8:
      return ncclInt8;
    case TDM_U8:
      return ncclUint8;
    case TDM_S32:
      return ncclInt32;
    case TDM_S64:
      return ncclInt64;
    default:
      return std::nullopt;
  }
}

// AVG is NCCL's own ncclAvg (sum and division in one pass, NCCL >= 2.10).
inline std::optional<ncclRedOp_t> nccl_op(tdm_reduce_op op) noexcept {
  switch (op) {
    case TDM_REDUCE_SUM:
      return ncclSum;
    case TDM_REDUCE_MAX:
      return ncclMax;
    case TDM_REDUCE_MIN:
      return ncclMin;
    case TDM_REDUCE_AVG:
      return ncclAvg;
    default:
      return std::nullopt;
  }
}

// "2.28.9" from ncclGetVersion's code (22809 since 2.9: major*10000 + minor*100 + patch).
inline void version_parts(int code, int& major, int& minor, int& patch) noexcept {
  if (code >= 10000) {
    major = code / 10000, minor = (code % 10000) / 100, patch = code % 100;
  } else {  // before 2.9: major*1000 + minor*100 + patch
    major = code / 1000, minor = (code % 1000) / 100, patch = code % 100;
  }
}

// The GPU a rank's communicator goes on, among `visible` GPUs (see
// comm_create in comm.hpp).
inline int communicator_device(const tdm_comm_init_info& info, int visible) {
  // ABI 1.5: the host says which GPU the rank trains on; the communicator
  // must be there, or NCCL moves the rank's gradients to another GPU.
  if (TDM_STRUCT_HAS(&info, tdm_comm_init_info, device) && info.device >= 0) {
    if (info.device >= visible)
      throw Error(TDM_INVALID_ARGUMENT, "nccl: rank " + std::to_string(info.rank) + " trains on GPU " +
                                            std::to_string(info.device) + " but only " +
                                            std::to_string(visible) + " are visible");
    return info.device;
  }
  // An older host: one visible GPU per process (CUDA_VISIBLE_DEVICES or
  // Slurm's --gpus-per-task) means device 0; otherwise the node-local rank.
  const int local = info.local_rank < 0 ? 0 : info.local_rank;
  const int device = visible == 1 ? 0 : local;
  if (device >= visible)
    throw Error(TDM_INVALID_ARGUMENT,
                "nccl: local rank " + std::to_string(local) + " has no GPU: " + std::to_string(visible) +
                    " visible; start at most " + std::to_string(visible) + " processes per node");
  return device;
}

}  // namespace tandem::nccl

#endif
