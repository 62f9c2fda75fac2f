// What the stages of a pipeline across ranks exchange through
// (rank_pipeline.hpp): the ranks of a run that differ only in their
// pipeline stage. The trainer implements it with a comm plugin's
// point-to-point calls and broadcast (train/distributed.hpp); the executor
// never sees a plugin.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "util/result.hpp"

namespace tandem::host::exec {

class StageLink {
 public:
  // A message on its way: started, then asked until it has finished.
  class Transfer {
   public:
    virtual ~Transfer() = default;
    // Never blocks. True once the bytes have gone (a send: its buffer may
    // be reused) or arrived (a receive). Asking is also what moves the
    // transfers of a library without a progress thread of its own along.
    virtual Result<bool> finished() = 0;
  };

  virtual ~StageLink() = default;
  virtual int stage() const = 0;  // this rank's stage
  // Host memory, kept valid and untouched until finished() says true (a
  // Transfer dropped before that leaves its bytes to the link: the process
  // must then not free them). The messages from one stage to another
  // arrive in the order their sends were started, and a stage's receives
  // from one peer take them in the order they were started. Called from
  // the thread that drives the executor.
  virtual Result<std::unique_ptr<Transfer>> start_send(const void* data, size_t bytes, int to) = 0;
  virtual Result<std::unique_ptr<Transfer>> start_receive(void* data, size_t bytes, int from) = 0;
  // Whether the link moves device memory of this rank's device (a GPU's
  // comm plugin): then the executor sends its values from device buffers
  // and receives into them (message_buffers.hpp) through the two calls
  // below, which the link has only then; start_send and start_receive, of
  // host memory, still work (through a device buffer of their own).
  virtual bool moves_device_memory() const { return false; }
  virtual Result<std::unique_ptr<Transfer>> start_device_send(const void* data, size_t bytes, int to);
  virtual Result<std::unique_ptr<Transfer>> start_device_receive(void* data, size_t bytes, int from);
  // How long a stage waits for one message before it gives up
  // (--comm-timeout); 0: no limit.
  virtual double timeout_seconds() const = 0;
  // `root`'s bytes to every stage; every stage calls it, in the same order,
  // from the thread that drives the executor.
  virtual Result<void> broadcast(void* data, size_t bytes, int root) = 0;
};

// Asks `transfer` until it finished, within `timeout_seconds` (0: no
// limit): at first yielding to the process's other threads, then sleeping
// between questions, as a thread that waits out a long wait should not hold
// its core. The error names `what` ("'h.2.x' from pipeline stage 0").
Result<void> wait_until_finished(StageLink::Transfer& transfer, double timeout_seconds, int stage,
                                 const std::string& what);

}  // namespace tandem::host::exec
