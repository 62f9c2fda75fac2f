// Graph nodes that communicate instead of compute: tensor parallelism
// (Megatron-LM) exchanges activations between the ranks holding slices of a
// layer. The executor runs them on the host, through this interface, which
// the trainer implements with a comm plugin; backends never see them. The
// ops (comm.all_reduce, comm.copy_to_parallel, comm.all_gather, comm.chunk)
// and their gradients are in the op table: host/ops/host_run.cpp.
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
  // Device buffers of the executor's device; `stream` is the executor's
  // stream's native handle (NULL for host backends); the executor has
  // synchronised its stream before the call.
  virtual Result<void> all_reduce_sum(void* buffer, size_t count, tdm_dtype dtype, void* stream) = 0;
  virtual Result<void> all_gather(const void* send, void* receive, size_t send_count, tdm_dtype dtype,
                                  void* stream) = 0;
};

}  // namespace tandem::host::exec
