// The copies of a DeviceExecutor's streamed values (stream_plan.hpp) while
// it runs a range of its schedule: each residency fetched from its home in
// host memory into its arena slot before its first touch, and written home
// after its last.
//
// Copies run one at a time, in the order they are issued, on one copy
// stream (so a fetch never overtakes the write home of the same value). A
// copy starts once the compute stream passed the point it was issued at (an
// event recorded there): a fetch's slot is then free of its earlier
// tenants, a write home's bytes final. A fetch is waited for before the
// node that first touches it, a write home before the first node after its
// residency's end, when the slot may hold something else; whatever is in
// flight when a range ends is waited for by finish(). Two orderings:
//   Events  (a device whose streams run by themselves: a GPU) the copy
//           stream waits for the compute stream's event and the compute
//           stream for the copy's end event; the host never blocks before
//           finish(). An observer thread times each copy from its events.
//   Worker  (a CPU backend, whose streams run on the calling thread) a
//           worker thread runs each copy after the compute event, and the
//           host waits for it: the copy overlaps the compute thread.
// The device's host-addressability chooses; TANDEM_STREAM_ORDERING=events
// or worker overrides it (tests run both on a CPU backend).
//
// Any range may run, in any order: a residency that begins before the range
// is fetched at the range's start, one that ends after it is written home
// at its end, so each run leaves every streamed value complete at home.
//
// Thread use: one thread calls begin/before/after/finish; the worker and
// observer are internal.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device/device.hpp"
#include "exec/copy_worker.hpp"
#include "exec/device_objects.hpp"
#include "exec/node_profile.hpp"
#include "exec/stream_plan.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {

// Since the executor was created.
struct StreamStats {
  uint64_t fetched_bytes = 0, written_home_bytes = 0;
  uint64_t copies = 0;
  double busy_us = 0;    // the copies' own time
  double waited_us = 0;  // of it, the time the host waited (not hidden by compute)
};

enum class StreamOrdering { Events, Worker };

class StreamedState {
 public:
  // `homes[i]`: where residency i's value lives in host memory, `bytes[i]`
  // its size; `arena`: the executor's arena, which holds the slots.
  // `names[i]`: its value's, for the profile.
  static Result<std::unique_ptr<StreamedState>> create(const DeviceHandle& device, tdm_stream* compute,
                                                       std::vector<Residency> residencies,
                                                       std::vector<void*> homes, std::vector<size_t> bytes,
                                                       std::vector<std::string> names, void* arena);
  StreamedState(const StreamedState&) = delete;
  StreamedState& operator=(const StreamedState&) = delete;
  ~StreamedState();  // waits for the copies in flight

  // Around each node of a range [first, end), in order; finish() after the last.
  Result<void> begin(size_t first, size_t end);
  Result<void> before(size_t position);
  Result<void> after(size_t position);
  Result<void> finish();

  const StreamStats& stats() const noexcept { return stats_; }
  // Each copy's span added to `profile` by finish() (nullptr: none).
  void record_into(NodeProfile* profile) noexcept { profile_ = profile; }

 private:
  using Clock = std::chrono::steady_clock;
  // What a range does at each of its positions (indices into residencies_).
  struct Actions {
    std::vector<std::vector<size_t>> wait_home, fetch, wait_fetch, write_home;  // by position - first
  };
  struct Lane {
    OwnedEvent fetch_ready, home_ready;                // compute stream progress at each issue
    OwnedEvent fetch_done, home_done;                  // Events: the copies' ends, on the copy stream
    CopyWorker::Ticket fetch, home;                    // the worker's copy, or the observer's timing
    bool fetch_pending = false, home_pending = false;  // Events: not yet waited for by compute
    // Written by the worker or observer, read after both tickets' waits:
    double busy_us = 0;
    Clock::time_point fetch_begin, fetch_end, home_begin, home_end;
  };
  StreamedState(const DeviceHandle& device, tdm_stream* compute) : device_(&device), compute_(compute) {}
  std::shared_ptr<const Actions> actions_for(size_t first, size_t end);
  Result<void> issue(size_t r, bool fetch);
  Result<void> enqueue_copy(Lane& lane, bool fetch, void* slot, void* home, size_t bytes);
  Error copy_failed(bool fetch, size_t bytes, tdm_status status) const;
  // Compute waits for lane r's fetch or write home (before a node).
  Result<void> await(size_t r, bool fetch);
  Result<void> wait(CopyWorker::Ticket& ticket, bool counts_as_waited);
  void record(size_t r);
  const tdm_backend_api& api() const noexcept { return *device_->backend().backend; }

  const DeviceHandle* device_;
  tdm_stream* compute_;
  StreamOrdering ordering_ = StreamOrdering::Worker;
  std::vector<Residency> residencies_;
  std::vector<void*> homes_;
  std::vector<size_t> bytes_;
  std::vector<std::string> names_;
  void* arena_ = nullptr;
  NodeProfile* profile_ = nullptr;
  std::vector<Lane> lanes_;  // per residency; never resized after create (jobs point into it)
  OwnedStream copy_;
  std::map<std::pair<size_t, size_t>, std::shared_ptr<const Actions>> cache_;
  std::shared_ptr<const Actions> current_;
  size_t first_ = 0;
  std::vector<size_t> in_flight_;  // lanes issued in this range
  StreamStats stats_;
  // Last: its thread (the copies' worker, or their observer) finishes its
  // jobs before the lanes and stream go.
  std::unique_ptr<CopyWorker> worker_ = std::make_unique<CopyWorker>();
};

}  // namespace tandem::host::exec
