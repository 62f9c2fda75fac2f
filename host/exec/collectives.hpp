// Graph nodes that communicate instead of compute: tensor parallelism
// (Megatron-LM) exchanges activations between the ranks holding slices of a
// layer, and ZeRO shares the optimizer's state and work between
// data-parallel peers. The executor runs them on the host, through this
// interface, which the trainer implements with a comm plugin (one per
// group of ranks); backends never see them. The ops (comm.*, zero.*) are in
// the op table: host/ops/host_run.cpp.
#pragma once

#include <cstddef>
#include <string>

#include "tandem/types.h"
#include "util/result.hpp"

namespace tandem::host::exec {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Device buffers of the executor's device. `stream` is the native handle
  // of the stream the executor ordered the call on (its compute stream, or
  // the stream of ZeRO's overlapped exchanges); NULL for host backends, whose
  // buffers are complete when the call comes. Calls come from one thread at
  // a time, in the same order on every rank.
  virtual Result<void> all_reduce_sum(void* buffer, size_t count, tdm_dtype dtype, void* stream) = 0;
  virtual Result<void> all_gather(const void* send, void* receive, size_t send_count, tdm_dtype dtype,
                                  void* stream) = 0;
  // `send` holds world() blocks of `receive_count`; rank r receives the mean
  // over ranks of block r.
  virtual Result<void> reduce_scatter_mean(const void* send, void* receive, size_t receive_count,
                                           tdm_dtype dtype, void* stream) = 0;
};

}  // namespace tandem::host::exec
