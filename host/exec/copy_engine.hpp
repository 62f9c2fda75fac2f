// The copies between the parts of a composed executor (composed_executor.hpp),
// issued early and waited for late so they overlap compute.
//
// Each transfer takes one route, decided once at creation from whether its
// two devices are host-addressable:
//   HostMemcpy      both are: a memcpy on the copy worker thread, after the
//                   source's compute stream reached the "ready" event.
//   DeviceToHost    the source is not: its copy stream waits for "ready",
//                   copy_d2h into the destination's memory, "done". When the
//                   source device has pinned host memory the copy goes into
//                   a pinned staging buffer and the worker copies it on
//                   after "done": a GPU's copy into pageable memory blocks
//                   the host until it ends, so nothing would overlap.
//   HostToDevice    the destination is not: "ready" reached (a host-
//                   addressable stream), copy_h2d on the destination's copy
//                   stream, "done". With pinned memory on the destination's
//                   device the worker waits for "ready", copies the bytes
//                   into a pinned staging buffer and enqueues the copy_h2d
//                   from there; without, the issuing thread waits and
//                   copies from the source's memory.
//   PeerToPeer      neither is, and both are devices of one backend that
//                   copies between them (ABI 1.7 copy_peer: two GPUs with
//                   peer access): the source's copy stream waits for
//                   "ready", copy_peer into the destination's memory,
//                   "done" (an event of the source's device, which the
//                   backend lets the destination's streams wait for).
//   DeviceToDevice  neither is, otherwise: copy_d2h into a staging buffer
//                   (pinned when a backend has it) on the source's copy
//                   stream, "middle"; the worker waits for it and enqueues
//                   copy_h2d on the destination's copy stream, "done".
// A part whose device is not host-addressable waits for a transfer on its
// compute stream (stream_wait_event on an event of its own device, or of the
// peer that copied into it: no host block); a host-addressable part blocks
// the host until the copy finished.
// CPU backends run streams synchronously, so the same calls are exercised
// there; TransferOptions::as_device drives a CPU part through the stream
// routes to test them without a GPU.
//
// Timing: a copy's duration ("busy") is measured by the worker (memcpy) or
// by an observer thread that waits for "ready" and then for "done" (the ABI
// has no event timer). "Waited" is the host's time blocked on the copy; a
// stream wait counts the time from the wait being enqueued to the copy
// finishing, an upper bound of the device's stall (it may have been behind).
//
// Thread use: one thread calls issue/wait/finish; the worker and observer
// threads are internal. Copy streams are shared with the worker, so every
// enqueue on one holds its mutex (a stream is used by one thread at a time).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "exec/copy_worker.hpp"
#include "exec/device_objects.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {

enum class CopyRoute { HostMemcpy, DeviceToHost, HostToDevice, DeviceToDevice, PeerToPeer };
const char* route_name(CopyRoute route);
CopyRoute route_between(bool from_host_addressable, bool to_host_addressable);
// The route between two devices driven as host-addressable or not: as
// route_between, and PeerToPeer where neither is and `from` copies
// straight into `to` (DeviceHandle::copies_directly_to).
CopyRoute route_between(const DeviceHandle& from, bool from_host_addressable, const DeviceHandle& to,
                        bool to_host_addressable);

// One device of a composed executor, as the copies see it.
struct CopyPart {
  const DeviceHandle* device = nullptr;
  tdm_stream* compute = nullptr;  // where the part's nodes run
  bool host_addressable = false;  // after TransferOptions::as_device
  // Host-side copies of this (not host-addressable) part go through host
  // staging even without pinned memory (TransferOptions::stage_as_pinned),
  // so the staged routes are exercised on CPU backends too.
  bool stage_host_copies = false;
};

// A part's copy stream (empty for a host-addressable part), and the lock
// held while copies are enqueued on it from several threads.
struct CopyStream {
  OwnedStream stream;
  std::mutex mutex;
};
// One for each part, by part.
Result<std::vector<std::unique_ptr<CopyStream>>> copy_streams(const std::vector<CopyPart>& parts,
                                                              const std::string& purpose);

struct CopyRequest {
  size_t from_part = 0, to_part = 0;
  size_t bytes = 0;
  std::string value;  // the global value's name, for messages
};

class CopyEngine {
 public:
  static Result<std::unique_ptr<CopyEngine>> create(std::vector<CopyPart> parts,
                                                    std::vector<CopyRequest> requests);
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;
  // Waits for every copy still running, then releases events and streams.
  ~CopyEngine();

  CopyRoute route(size_t transfer) const { return lanes_[transfer].route; }
  bool issued(size_t transfer) const { return lanes_[transfer].issued; }

  // Starts transfer `t` once the source part's work launched so far is done.
  // `dst`/`src` are the parts' current addresses of the two values.
  Result<void> issue(size_t t, void* dst, const void* src);
  // Before the destination part's first reader of the copied value.
  Result<void> wait_in_destination(size_t t);
  // Before a node of the source part overwrites the source's storage.
  Result<void> wait_in_source(size_t t);
  // Blocks the host until transfer `t` is complete.
  Result<void> wait_on_host(size_t t);
  // The same for a copy run in order (nothing else runs meanwhile): all of
  // its time counts as waited, even the part that ran before the host began
  // to wait (posting it to the thread), which no compute hid.
  Result<void> wait_in_order(size_t t);
  // Blocks until every issued transfer is complete, makes them issuable
  // again, and adds their timing. The first error of any of them.
  Result<void> finish();

  double busy_us() const noexcept { return busy_us_; }
  double waited_us() const noexcept { return waited_us_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Lane {
    CopyRequest request;
    CopyRoute route = CopyRoute::HostMemcpy;
    OwnedEvent ready;   // source compute stream, at issue
    OwnedEvent middle;  // DeviceToDevice: the staging buffer is filled (source device)
    OwnedEvent done;    // the last enqueued step (device of the stream it ran on; PeerToPeer: the source)
    HostStaging staging;
    // DeviceToHost / HostToDevice through `staging` (pinned, or as_device):
    // the worker does the host side, host_step ends the copy.
    bool staged = false;
    // One issue, until finish():
    bool issued = false;
    bool complete = false;  // the host has seen it finish
    bool exposed = false;   // run in order: none of it hidden
    CopyWorker::Ticket host_step, observation;
    Clock::time_point issued_at;
    std::optional<Clock::time_point> device_wait_at;  // a stream_wait_event, for the stall estimate
    double busy_us = 0, waited_us = 0;                // this issue's
    Clock::time_point finished_at;                    // observed end of the copy
  };
  CopyEngine() = default;
  Result<void> add_lane(const CopyRequest& request);
  Result<void> issue_steps(Lane& lane, void* dst, const void* src);
  void issue_memcpy(Lane& lane, void* dst, const void* src);
  Result<void> issue_host_to_device(Lane& lane, void* dst, const void* src);
  // On the source's copy stream: wait for "ready", `copy`, record `end`.
  Result<void> on_source_stream(Lane& lane, const std::function<tdm_status(tdm_stream*)>& copy,
                                const char* what, OwnedEvent& end, const char* end_what);
  // On the worker: the staging buffer to `dst` on the destination's copy
  // stream, then "done" (DeviceToDevice and staged HostToDevice).
  Result<void> copy_from_staging(Lane& lane, void* dst);
  void observe(Lane& lane);
  Result<void> stream_wait(size_t part, const OwnedEvent& event);
  Error failure(const Lane& lane, const std::string& what, tdm_status status) const;
  const tdm_backend_api& api(size_t part) const { return *parts_[part].device->backend().backend; }

  std::vector<CopyPart> parts_;
  std::vector<std::unique_ptr<CopyStream>> copy_streams_;  // per part
  std::vector<Lane> lanes_;  // never resized after create: jobs keep pointers into it
  double busy_us_ = 0, waited_us_ = 0;
  // Declared last, so destroyed first: their threads finish their jobs
  // (which use the lanes and streams above) before anything is released.
  std::unique_ptr<CopyWorker> worker_ = std::make_unique<CopyWorker>();
  std::unique_ptr<CopyWorker> observer_ = std::make_unique<CopyWorker>();
};

}  // namespace tandem::host::exec
