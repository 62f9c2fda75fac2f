// Rendezvous: rank 0's bytes (NCCL's unique id) delivered to every rank
// before the GPU communicator can exist (or a group's rank 0's to the
// group's ranks). Two ways, chosen by --rendezvous:
//   mpi             a broadcast through the mpi comm plugin (under mpirun/srun);
//   file:///path    rank 0 writes the bytes atomically to a path on a file
//                   system every rank sees; the others wait for it. The path
//                   must not exist yet (a stale file from an earlier job would
//                   pair ranks of different jobs), so rank 0 refuses one that does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plugin/registry.hpp"
#include "train/distributed.hpp"

namespace tandem::host::train {

// On rank 0 `bytes` are sent; on the others they are replaced by rank 0's.
// Waits at most `timeout_seconds`. With `part`, `group` is one of several
// groups of the job's processes (comm_create's `group`): each group's rank
// 0 delivers its own bytes to its own ranks, through an MPI communicator of
// that group, or a file of its own (the path with ".group-<part>" added; the
// caller gives each kind of group a path of its own).
Result<void> rendezvous(const std::string& how, const PluginRegistry& registry, const ProcessGroup& group,
                        std::vector<unsigned char>& bytes, double timeout_seconds,
                        std::optional<int32_t> part = std::nullopt);

}  // namespace tandem::host::train
