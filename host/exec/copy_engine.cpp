#include "exec/copy_engine.hpp"

#include <algorithm>
#include <cstring>

#include "util/last_error.hpp"

namespace tandem::host::exec {
namespace {

double micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

const tdm_backend_api& api_of(const OwnedEvent& event) {
  return *event.device()->backend().backend;
}

}  // namespace

const char* route_name(CopyRoute route) {
  switch (route) {
    case CopyRoute::HostMemcpy:
      return "memcpy on the copy thread";
    case CopyRoute::DeviceToHost:
      return "device to host on the source's copy stream";
    case CopyRoute::HostToDevice:
      return "host to device on the destination's copy stream";
    case CopyRoute::PeerToPeer:
      return "device to device, a peer copy on the source's copy stream";
    default:
      return "device to device through host staging";
  }
}

CopyRoute route_between(bool from_host_addressable, bool to_host_addressable) {
  if (from_host_addressable && to_host_addressable) return CopyRoute::HostMemcpy;
  if (to_host_addressable) return CopyRoute::DeviceToHost;
  if (from_host_addressable) return CopyRoute::HostToDevice;
  return CopyRoute::DeviceToDevice;
}

CopyRoute route_between(const DeviceHandle& from, bool from_host_addressable, const DeviceHandle& to,
                        bool to_host_addressable) {
  const CopyRoute route = route_between(from_host_addressable, to_host_addressable);
  return route == CopyRoute::DeviceToDevice && from.copies_directly_to(to) ? CopyRoute::PeerToPeer : route;
}

Result<std::vector<std::unique_ptr<CopyStream>>> copy_streams(const std::vector<CopyPart>& parts,
                                                              const std::string& purpose) {
  std::vector<std::unique_ptr<CopyStream>> streams;
  for (const CopyPart& part : parts) {
    auto& made = streams.emplace_back(std::make_unique<CopyStream>());
    if (part.host_addressable) continue;
    auto stream = OwnedStream::create(*part.device, purpose);
    if (!stream) return stream.error();
    made->stream = std::move(*stream);
  }
  return streams;
}

Result<std::unique_ptr<CopyEngine>> CopyEngine::create(std::vector<CopyPart> parts,
                                                       std::vector<CopyRequest> requests) {
  std::unique_ptr<CopyEngine> e(new CopyEngine());
  e->parts_ = std::move(parts);
  auto streams = copy_streams(e->parts_, "copy");
  if (!streams) return streams.error();
  e->copy_streams_ = std::move(*streams);
  e->lanes_.reserve(requests.size());
  for (const CopyRequest& request : requests)
    if (auto r = e->add_lane(request); !r) return r.error();
  return e;
}

Result<void> CopyEngine::add_lane(const CopyRequest& request) {
  Lane& lane = lanes_.emplace_back();
  lane.request = request;
  const CopyPart& from = parts_[request.from_part];
  const CopyPart& to = parts_[request.to_part];
  lane.route = route_between(*from.device, from.host_addressable, *to.device, to.host_addressable);
  auto make = [](const DeviceHandle& device, OwnedEvent& into) -> Result<void> {
    auto event = OwnedEvent::create(device);
    if (!event) return event.error();
    into = std::move(*event);
    return {};
  };
  if (auto r = make(*from.device, lane.ready); !r) return r;
  switch (lane.route) {
    case CopyRoute::HostMemcpy:
      break;
    case CopyRoute::DeviceToHost:
    case CopyRoute::HostToDevice: {
      const CopyPart& device_side = lane.route == CopyRoute::DeviceToHost ? from : to;
      if (auto r = make(*device_side.device, lane.done); !r) return r;
      auto staging = HostStaging::allocate(request.bytes, {device_side.device});
      if (!staging) return staging.error();
      lane.staged = staging->pinned() || device_side.stage_host_copies;
      if (lane.staged) lane.staging = std::move(*staging);
      break;
    }
    case CopyRoute::PeerToPeer:
      if (auto r = make(*from.device, lane.done); !r) return r;
      break;
    case CopyRoute::DeviceToDevice: {
      if (auto r = make(*from.device, lane.middle); !r) return r;
      if (auto r = make(*to.device, lane.done); !r) return r;
      auto staging = HostStaging::allocate(request.bytes, {from.device, to.device});
      if (!staging) return staging.error();
      lane.staging = std::move(*staging);
      break;
    }
  }
  return {};
}

CopyEngine::~CopyEngine() {
  (void)finish();  // jobs still queued use the lanes
  worker_.reset();
  observer_.reset();
}

Error CopyEngine::failure(const Lane& lane, const std::string& what, tdm_status status) const {
  return make_error(
      "copy of '" + lane.request.value + "' from " + parts_[lane.request.from_part].device->id() + " to " +
          parts_[lane.request.to_part].device->id() + " failed (" + what + "): " + plugin_reason(status),
      status);
}

Result<void> CopyEngine::issue(size_t t, void* dst, const void* src) {
  Lane& lane = lanes_[t];
  if (lane.issued)
    return make_error("copy of '" + lane.request.value + "' issued twice in one run (internal)",
                      TDM_INTERNAL);
  lane.issued = true;
  lane.complete = false;
  lane.exposed = false;
  lane.busy_us = lane.waited_us = 0;
  lane.device_wait_at.reset();
  lane.issued_at = Clock::now();
  clear_last_error();
  tdm_status status =
      api(lane.request.from_part).event_record(lane.ready.get(), parts_[lane.request.from_part].compute);
  if (status != TDM_OK) {
    lane.complete = true;  // nothing was enqueued
    return failure(lane, "recording the source's progress", status);
  }
  return issue_steps(lane, dst, src);
}

Result<void> CopyEngine::issue_steps(Lane& lane, void* dst, const void* src) {
  const size_t from = lane.request.from_part, to = lane.request.to_part;
  const size_t bytes = lane.request.bytes;
  switch (lane.route) {
    case CopyRoute::HostMemcpy:
      issue_memcpy(lane, dst, src);
      return {};
    case CopyRoute::DeviceToHost: {
      void* target = lane.staged ? lane.staging.data() : dst;
      auto r = on_source_stream(
          lane, [&](tdm_stream* copy) { return api(from).copy_d2h(copy, target, src, bytes); }, "copy_d2h",
          lane.done, "recording its end");
      if (!r) return r;
      if (lane.staged)
        lane.host_step = worker_->post([this, &lane, dst, bytes]() -> Result<void> {
          clear_last_error();
          const tdm_status status = api_of(lane.done).event_synchronize(lane.done.get());
          if (status != TDM_OK) return failure(lane, "copy_d2h to staging", status);
          std::memcpy(dst, lane.staging.data(), bytes);
          return {};
        });
      break;
    }
    case CopyRoute::HostToDevice:
      if (auto r = issue_host_to_device(lane, dst, src); !r) return r;
      break;
    case CopyRoute::PeerToPeer: {
      tdm_device* peer = parts_[to].device->get();
      auto r = on_source_stream(
          lane, [&](tdm_stream* copy) { return api(from).copy_peer(copy, peer, dst, src, bytes); },
          "copy_peer", lane.done, "recording its end");
      if (!r) return r;
      break;
    }
    case CopyRoute::DeviceToDevice: {
      auto r = on_source_stream(
          lane, [&](tdm_stream* copy) { return api(from).copy_d2h(copy, lane.staging.data(), src, bytes); },
          "copy_d2h to staging", lane.middle, "recording the staging");
      if (!r) return r;
      // Two devices (maybe two backends) share no event: the worker waits
      // for the first half on the host, then enqueues the second.
      lane.host_step = worker_->post([this, &lane, dst]() -> Result<void> {
        clear_last_error();
        tdm_status status = api_of(lane.middle).event_synchronize(lane.middle.get());
        if (status != TDM_OK) return failure(lane, "copy_d2h to staging", status);
        return copy_from_staging(lane, dst);
      });
      break;
    }
  }
  observe(lane);
  return {};
}

// HostMemcpy: on the worker, once the source reached "ready" (its stream
// may run behind the host on a backend of its own making; a synchronous CPU
// stream returns at once).
void CopyEngine::issue_memcpy(Lane& lane, void* dst, const void* src) {
  const size_t bytes = lane.request.bytes;
  lane.host_step = worker_->post([this, &lane, dst, src, bytes]() -> Result<void> {
    clear_last_error();
    const tdm_status status = api_of(lane.ready).event_synchronize(lane.ready.get());
    if (status != TDM_OK) return failure(lane, "waiting for the source", status);
    const auto start = Clock::now();
    std::memcpy(dst, src, bytes);
    lane.finished_at = Clock::now();
    lane.busy_us = micros(lane.finished_at - start);
    return {};
  });
}

Result<void> CopyEngine::issue_host_to_device(Lane& lane, void* dst, const void* src) {
  const size_t from = lane.request.from_part, to = lane.request.to_part;
  const size_t bytes = lane.request.bytes;
  if (lane.staged) {
    lane.host_step = worker_->post([this, &lane, dst, src, bytes]() -> Result<void> {
      clear_last_error();
      tdm_status status = api_of(lane.ready).event_synchronize(lane.ready.get());
      if (status != TDM_OK) return failure(lane, "waiting for the source", status);
      std::memcpy(lane.staging.data(), src, bytes);
      return copy_from_staging(lane, dst);
    });
    return {};
  }
  const auto check = [&](tdm_status status, const char* what) -> Result<void> {
    if (status == TDM_OK) return {};
    return failure(lane, what, status);
  };
  clear_last_error();
  // A host-addressable source: its stream is synchronous or nearly so.
  if (auto r = check(api(from).event_synchronize(lane.ready.get()), "waiting for the source"); !r) return r;
  std::lock_guard<std::mutex> lock(copy_streams_[to]->mutex);
  tdm_stream* copy = copy_streams_[to]->stream.get();
  if (auto r = check(api(to).copy_h2d(copy, dst, src, bytes), "copy_h2d"); !r) return r;
  return check(api(to).event_record(lane.done.get(), copy), "recording its end");
}

Result<void> CopyEngine::on_source_stream(Lane& lane, const std::function<tdm_status(tdm_stream*)>& copy,
                                          const char* what, OwnedEvent& end, const char* end_what) {
  const size_t from = lane.request.from_part;
  std::lock_guard<std::mutex> lock(copy_streams_[from]->mutex);
  tdm_stream* stream = copy_streams_[from]->stream.get();
  clear_last_error();
  tdm_status status = api(from).stream_wait_event(stream, lane.ready.get());
  if (status != TDM_OK) return failure(lane, "ordering after the source", status);
  if ((status = copy(stream)) != TDM_OK) return failure(lane, what, status);
  if ((status = api(from).event_record(end.get(), stream)) != TDM_OK) return failure(lane, end_what, status);
  return {};
}

Result<void> CopyEngine::copy_from_staging(Lane& lane, void* dst) {
  const size_t to = lane.request.to_part;
  std::lock_guard<std::mutex> lock(copy_streams_[to]->mutex);
  tdm_stream* copy = copy_streams_[to]->stream.get();
  tdm_status status = api(to).copy_h2d(copy, dst, lane.staging.data(), lane.request.bytes);
  if (status != TDM_OK) return failure(lane, "copy_h2d from staging", status);
  status = api(to).event_record(lane.done.get(), copy);
  if (status != TDM_OK) return failure(lane, "recording its end", status);
  return {};
}

void CopyEngine::observe(Lane& lane) {
  lane.observation = observer_->post([this, &lane]() -> Result<void> {
    clear_last_error();
    tdm_status status = api_of(lane.ready).event_synchronize(lane.ready.get());
    if (status != TDM_OK) return failure(lane, "waiting for the source", status);
    const auto start = Clock::now();
    // Staged copies and DeviceToDevice: the worker records "done" or ends
    // the copy; wait until it did.
    if (auto r = worker_->wait(lane.host_step); !r) return r;
    status = api_of(lane.done).event_synchronize(lane.done.get());
    if (status != TDM_OK) return failure(lane, "the copy", status);
    lane.finished_at = Clock::now();
    lane.busy_us = micros(lane.finished_at - start);
    return {};
  });
}

Result<void> CopyEngine::wait_on_host(size_t t) {
  Lane& lane = lanes_[t];
  if (!lane.issued || lane.complete) return {};
  const auto start = Clock::now();
  Result<void> r = worker_->wait(lane.host_step);
  if (r && lane.done) {
    clear_last_error();
    const tdm_status status = api_of(lane.done).event_synchronize(lane.done.get());
    if (status != TDM_OK) r = failure(lane, "the copy", status);
  }
  lane.waited_us += micros(Clock::now() - start);
  lane.complete = true;  // an error is reported once, by this wait
  return r;
}

Result<void> CopyEngine::wait_in_order(size_t t) {
  lanes_[t].exposed = true;
  return wait_on_host(t);
}

Result<void> CopyEngine::stream_wait(size_t part, const OwnedEvent& event) {
  clear_last_error();
  const tdm_status status = api(part).stream_wait_event(parts_[part].compute, event.get());
  if (status != TDM_OK)
    return make_error(
        "cannot order work on " + parts_[part].device->id() + " after a copy: " + plugin_reason(status),
        status);
  return {};
}

Result<void> CopyEngine::wait_in_destination(size_t t) {
  Lane& lane = lanes_[t];
  const size_t to = lane.request.to_part;
  if (!lane.issued || lane.complete) return {};
  if (parts_[to].host_addressable) return wait_on_host(t);
  // The destination is a device: "done" is on its own copy stream, recorded
  // by the worker on the staged routes.
  if (lane.route == CopyRoute::DeviceToDevice || lane.staged) {
    const auto start = Clock::now();
    Result<void> r = worker_->wait(lane.host_step);  // until "done" was recorded
    lane.waited_us += micros(Clock::now() - start);
    if (!r) {
      lane.complete = true;
      return r;
    }
  }
  if (auto r = stream_wait(to, lane.done); !r) return r;
  lane.device_wait_at = Clock::now();
  return {};
}

Result<void> CopyEngine::wait_in_source(size_t t) {
  Lane& lane = lanes_[t];
  const size_t from = lane.request.from_part;
  if (!lane.issued || lane.complete) return {};
  if (parts_[from].host_addressable) return wait_on_host(t);
  // The source is a device: its copy stream read the bytes by "done"
  // (DeviceToHost, PeerToPeer) or "middle" (DeviceToDevice), all events of
  // its own.
  if (auto r = stream_wait(from, lane.route == CopyRoute::DeviceToDevice ? lane.middle : lane.done); !r)
    return r;
  if (!lane.device_wait_at) lane.device_wait_at = Clock::now();
  return {};
}

Result<void> CopyEngine::finish() {
  Result<void> first;
  for (size_t t = 0; t < lanes_.size(); ++t) {
    Lane& lane = lanes_[t];
    if (!lane.issued) continue;
    Result<void> r = wait_on_host(t);
    Result<void> observed = observer_->wait(lane.observation);
    if (first && !r) first = r;
    if (first && !observed && r) first = observed;
    if (lane.device_wait_at && lane.finished_at > *lane.device_wait_at)
      lane.waited_us += micros(lane.finished_at - *lane.device_wait_at);
    // Of the copy's own duration, how much someone waited for (waiting for
    // the source's producer is compute, not copy time).
    if (lane.exposed) lane.waited_us = lane.busy_us;
    busy_us_ += lane.busy_us;
    waited_us_ += std::min(lane.waited_us, lane.busy_us);
    lane.issued = false;
    lane.host_step = {};
    lane.observation = {};
  }
  return first;
}

}  // namespace tandem::host::exec
