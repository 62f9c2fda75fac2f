// Point to point that returns at once (exec::StageLink's start_send and
// start_receive) on top of a comm plugin that only has the blocking send
// and recv of ABI 1.15: each peer and direction gets a thread of its own
// that runs the transfers one after another, in the order they were
// started, which keeps the order the ABI promises per peer. A plugin of
// ABI 1.16 with send_start, recv_start and request_test needs none of this
// (distributed.cpp).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "exec/stage_link.hpp"

namespace tandem::host::train {

class ThreadedPointToPoint {
 public:
  // A blocking transfer of `bytes` to or from `peer`.
  using Blocking = std::function<Result<void>(void* data, size_t bytes, int peer)>;
  ThreadedPointToPoint(Blocking send, Blocking receive);
  // Waits for each thread that is not stuck on a peer; a stuck one is left
  // to process exit (its peer may never come).
  ~ThreadedPointToPoint();
  // No transfer queued or moving.
  bool idle() const;
  ThreadedPointToPoint(const ThreadedPointToPoint&) = delete;
  ThreadedPointToPoint& operator=(const ThreadedPointToPoint&) = delete;

  std::unique_ptr<exec::StageLink::Transfer> start_send(const void* data, size_t bytes, int to);
  std::unique_ptr<exec::StageLink::Transfer> start_receive(void* data, size_t bytes, int from);

 private:
  struct Job;
  class Lane;      // one peer and direction: its thread and queue
  class Transfer;  // a Job asked after
  std::unique_ptr<exec::StageLink::Transfer> start(bool sending, void* data, size_t bytes, int peer);

  Blocking send_, receive_;
  std::map<std::pair<int, bool>, std::unique_ptr<Lane>> lanes_;  // (peer, sending)
};

}  // namespace tandem::host::train
