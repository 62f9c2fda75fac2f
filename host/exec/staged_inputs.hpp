// The next batch's host-to-device copy while the current step runs (issue
// #5, point 5): an input value gets a second device buffer; stage() copies
// host bytes into a staging buffer (pinned when the backend has it) and
// enqueues the copy into the spare device buffer on a copy stream of its
// own; use() swaps current and spare for every staged value (rewriting the
// addresses the bound nodes read) and makes the compute stream wait for the
// copies. Nothing blocks the host but the memcpy into staging.
//
// Ordering, by events (a CPU backend's synchronous streams satisfy them
// trivially, through the same calls):
//   - the copy into the spare buffer waits for `released_`, recorded on the
//     compute stream at the last swap: every node that read that buffer in
//     its previous turn was enqueued before it;
//   - the compute stream waits for `staged_` at the swap, so no node reads a
//     buffer before its copy landed;
//   - stage() waits on the host for the previous staged copy before it
//     rewrites the staging buffer that copy reads from.
//
// Thread use: one thread, the executor's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "exec/device_objects.hpp"
#include "graph/graph.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {

class StagedInputs {
 public:
  static Result<StagedInputs> create(const DeviceHandle& device);

  // `references`: every place that holds the value's current device address
  // (the executor's persistent slot, the bound nodes' input and output
  // pointers); `spare` is its second buffer, allocated by the executor.
  void add(ValueId value, std::string name, size_t bytes, void* spare, std::vector<void**> references);
  bool contains(ValueId value) const;
  Result<void> stage(ValueId value, const void* host, size_t bytes);
  // Swaps every value staged since the last use; nothing staged: nothing done.
  Result<void> use(tdm_stream* compute);
  // A synchronous write() replaced the current buffer's contents: a staged
  // copy of that value must not replace it in turn.
  void discard(ValueId value);

 private:
  struct Entry {
    ValueId value = kNoValue;
    std::string name;
    size_t bytes = 0;
    void* spare = nullptr;
    std::vector<void**> references;
    HostStaging host;
    bool staged = false;
  };
  StagedInputs() = default;
  Result<void> check(tdm_status status, const Entry& entry, const char* what) const;

  const DeviceHandle* device_ = nullptr;
  OwnedStream copy_stream_;
  OwnedEvent staged_;    // copy stream: every staged copy enqueued so far
  OwnedEvent released_;  // compute stream: readers of the spare buffers
  bool ever_staged_ = false, ever_released_ = false;
  std::vector<Entry> entries_;
};

}  // namespace tandem::host::exec
