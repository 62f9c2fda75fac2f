#include "exec/pipeline_copies.hpp"

#include <cstring>

#include "util/last_error.hpp"

namespace tandem::host::exec {

Result<std::unique_ptr<PipelineCopies>> PipelineCopies::create(std::vector<CopyPart> parts,
                                                               std::vector<CopyRequest> requests,
                                                               std::vector<CopyRoute> routes) {
  std::unique_ptr<PipelineCopies> c(new PipelineCopies());
  c->parts_ = std::move(parts);
  auto streams = copy_streams(c->parts_, "pipeline copies");
  if (!streams) return streams.error();
  c->streams_ = std::move(*streams);
  for (size_t t = 0; t < requests.size(); ++t) {
    Lane& lane = c->lanes_.emplace_back();
    lane.request = std::move(requests[t]);
    lane.route = routes[t];
  }
  return c;
}

Error PipelineCopies::failure(const Lane& lane, const std::string& what, tdm_status status) const {
  return make_error("pipeline copy of '" + lane.request.value + "' from " +
                        parts_[lane.request.from_part].device->id() + " to " +
                        parts_[lane.request.to_part].device->id() + " failed (" + what +
                        "): " + plugin_reason(status),
                    status);
}

template <class Copy>
Result<void> PipelineCopies::on_copy_stream(const Lane& lane, size_t part, const char* what, Copy copy) {
  std::lock_guard lock(streams_[part]->mutex);
  tdm_stream* stream = streams_[part]->stream.get();
  clear_last_error();
  tdm_status status = copy(stream);
  if (status != TDM_OK) return failure(lane, what, status);
  status = api(part).stream_synchronize(stream);
  if (status != TDM_OK) return failure(lane, std::string(what) + ", waiting for it", status);
  return {};
}

Result<void> PipelineCopies::copy(size_t t, void* dst, const void* src) {
  Lane& lane = lanes_[t];
  const size_t from = lane.request.from_part, to = lane.request.to_part, bytes = lane.request.bytes;
  Result<void> done;
  switch (lane.route) {
    case CopyRoute::HostMemcpy:
      std::memcpy(dst, src, bytes);
      break;
    case CopyRoute::DeviceToHost:
      done = on_copy_stream(lane, from, "copy_d2h",
                            [&](tdm_stream* s) { return api(from).copy_d2h(s, dst, src, bytes); });
      break;
    case CopyRoute::HostToDevice:
      done = on_copy_stream(lane, to, "copy_h2d",
                            [&](tdm_stream* s) { return api(to).copy_h2d(s, dst, src, bytes); });
      break;
    case CopyRoute::PeerToPeer: {
      tdm_device* peer = parts_[to].device->get();
      done = on_copy_stream(lane, from, "copy_peer",
                            [&](tdm_stream* s) { return api(from).copy_peer(s, peer, dst, src, bytes); });
      break;
    }
    case CopyRoute::DeviceToDevice: {
      std::lock_guard lock(*lane.staging_mutex);
      // Made at the first copy: only the transfers the pipeline copies need one.
      if (lane.staging.data() == nullptr) {
        auto staging = HostStaging::allocate(bytes, {parts_[from].device, parts_[to].device});
        if (!staging) return staging.error();
        lane.staging = std::move(*staging);
      }
      void* staging = lane.staging.data();
      done = on_copy_stream(lane, from, "copy_d2h to staging",
                            [&](tdm_stream* s) { return api(from).copy_d2h(s, staging, src, bytes); });
      if (done)
        done = on_copy_stream(lane, to, "copy_h2d from staging",
                              [&](tdm_stream* s) { return api(to).copy_h2d(s, dst, staging, bytes); });
      break;
    }
  }
  if (!done) return done;
  ++counts_[static_cast<size_t>(lane.route)];
  return {};
}

uint64_t PipelineCopies::copies(CopyRoute route) const {
  return counts_[static_cast<size_t>(route)];
}

}  // namespace tandem::host::exec
