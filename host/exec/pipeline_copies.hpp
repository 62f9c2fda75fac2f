// The copies of a pipelined step (pipelined_executor.hpp) between the
// instances of its stages, on devices the host addresses or not: each is
// complete when copy() returns, by the route the composed executor gave its
// transfer (copy_engine.hpp):
//   HostMemcpy      memcpy;
//   DeviceToHost    copy_d2h on the source device's copy stream;
//   HostToDevice    copy_h2d on the destination device's copy stream;
//   PeerToPeer      copy_peer on the source device's copy stream;
//   DeviceToDevice  copy_d2h into the transfer's host staging buffer, then
//                   copy_h2d from it.
// No event orders a copy after the segment that made its source: a stage's
// thread marks a segment run only once its device finished it
// (DeviceExecutor::run synchronises its stream), and the reading stage runs
// its segment only after the copy returned. The copy runs on the thread of
// whichever stage claims it, while the other stage computes.
//
// Thread use: any stage's thread. A device's copy stream, and a transfer's
// staging buffer, serve one copy at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "exec/copy_engine.hpp"
#include "exec/device_objects.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {

class PipelineCopies {
 public:
  // `routes[t]` is transfer t's (requests[t]); a copy stream is made for
  // each part the host does not address.
  static Result<std::unique_ptr<PipelineCopies>> create(std::vector<CopyPart> parts,
                                                        std::vector<CopyRequest> requests,
                                                        std::vector<CopyRoute> routes);
  PipelineCopies(const PipelineCopies&) = delete;
  PipelineCopies& operator=(const PipelineCopies&) = delete;

  // Transfer t's bytes from `src` (in its source part's memory) to `dst`
  // (in its destination part's), complete on return.
  Result<void> copy(size_t t, void* dst, const void* src);

  // Copies made so far by `route`.
  uint64_t copies(CopyRoute route) const;

 private:
  struct Lane {
    CopyRequest request;
    CopyRoute route = CopyRoute::HostMemcpy;
    HostStaging staging;  // DeviceToDevice, from its first copy
    std::unique_ptr<std::mutex> staging_mutex = std::make_unique<std::mutex>();
  };
  PipelineCopies() = default;
  // `copy` enqueued on part `part`'s copy stream, and waited for there.
  template <class Copy>
  Result<void> on_copy_stream(const Lane& lane, size_t part, const char* what, Copy copy);
  Error failure(const Lane& lane, const std::string& what, tdm_status status) const;
  const tdm_backend_api& api(size_t part) const { return *parts_[part].device->backend().backend; }

  std::vector<CopyPart> parts_;
  std::vector<std::unique_ptr<CopyStream>> streams_;  // per part
  std::vector<Lane> lanes_;
  static constexpr size_t kRoutes = static_cast<size_t>(CopyRoute::PeerToPeer) + 1;  // CopyRoute's values
  std::atomic<uint64_t> counts_[kRoutes] = {};
};

}  // namespace tandem::host::exec
