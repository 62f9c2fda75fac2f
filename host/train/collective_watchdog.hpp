// The host's guard against a comm plugin that does not honour its timeout.
//
// Every collective gets `timeout_seconds` (tdm_comm_init_info), and a plugin
// that honours it fails a collective some rank never joins with
// TDM_TIMEOUT. One that does not (a blocking socket read, an MPI call
// without a deadline) would hang the job for ever. So each call into a comm
// plugin is watched: when it has not returned a grace period after its
// timeout, the process stops with exit code 3 (a plugin error) and a
// message naming the rank, the plugin, its file and the call. Every rank
// waiting on the missing one is watched alike, so the whole job ends.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace tandem::host::train {

// How long past its timeout a call may still return: a quarter of the
// timeout, at least 5 s (a plugin reports its timeout after noticing it).
double watchdog_grace(double timeout_seconds);

class WatchedCall {
 public:
  // What a watched call is ("rank 1: allreduce of 4096 f32 in comm plugin
  // 'tcp' (/path/libtandem-tcp.so)"), asked only when it is overdue: the
  // call must keep what it refers to alive.
  using Describe = std::function<std::string()>;
  // Watches the current call until destroyed. `timeout_seconds` 0 watches
  // nothing (no limit was asked).
  WatchedCall(Describe describe, double timeout_seconds);
  ~WatchedCall();
  WatchedCall(const WatchedCall&) = delete;
  WatchedCall& operator=(const WatchedCall&) = delete;

 private:
  uint64_t id_ = 0;  // 0: not watched
};

}  // namespace tandem::host::train
