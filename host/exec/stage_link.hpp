// What the stages of a pipeline across ranks exchange through
// (rank_pipeline.hpp): the ranks of a run that differ only in their
// pipeline stage. The trainer implements it with a comm plugin's send, recv
// and broadcast (train/distributed.hpp); the executor never sees a plugin.
#pragma once

#include <cstddef>

#include "util/result.hpp"

namespace tandem::host::exec {

class StageLink {
 public:
  virtual ~StageLink() = default;
  virtual int stage() const = 0;  // this rank's stage
  // Host memory. A message from one stage to another arrives in the order
  // it was sent. Called from several threads at once: one sending and one
  // receiving per peer stage.
  virtual Result<void> send(const void* data, size_t bytes, int to) = 0;
  virtual Result<void> receive(void* data, size_t bytes, int from) = 0;
  // `root`'s bytes to every stage; every stage calls it, in the same order,
  // from the thread that drives the executor.
  virtual Result<void> broadcast(void* data, size_t bytes, int root) = 0;
};

}  // namespace tandem::host::exec
