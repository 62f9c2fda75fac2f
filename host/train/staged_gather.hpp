// An all-gather of host memory through a communicator that reads device
// memory (a GPU's nccl): checkpoints gather tensor-parallel slices and
// ZeRO's shards as host bytes. The bytes go through one device buffer of a
// bounded size, piece by piece, so that gathering a large tensor near the
// end of a step does not need device memory for all of it from every rank.
#pragma once

#include <cstddef>
#include <functional>

#include "util/result.hpp"

namespace tandem::host::train {

// The device side of one piece: each call completes before it returns.
struct StagingCalls {
  std::function<Result<void>(void* device, const void* host, size_t bytes)> to_device;
  std::function<Result<void>(void* host, const void* device, size_t bytes)> to_host;
  // Every rank's `bytes` at `send` into `receive`, rank-major.
  std::function<Result<void>(const void* send, void* receive, size_t bytes)> gather;
};

// `bytes` of `send` from each of `world` ranks into `receive` (world ×
// bytes, rank-major), through `buffer`: device memory of (world + 1) ×
// `piece` bytes. `piece` is a multiple of `element` (the dtype's size, so
// that no element is split between pieces), and so is `bytes`.
Result<void> gather_in_pieces(const void* send, void* receive, size_t bytes, int world, size_t element,
                              void* buffer, size_t piece, const StagingCalls& calls);

// The piece for `bytes` per rank: at most `limit`, whole elements.
size_t staging_piece(size_t bytes, size_t limit, size_t element);

}  // namespace tandem::host::train
