#include "exec/staged_inputs.hpp"

#include <algorithm>
#include <cstring>

#include "util/last_error.hpp"

namespace tandem::host::exec {

Result<StagedInputs> StagedInputs::create(const DeviceHandle& device) {
  StagedInputs s;
  s.device_ = &device;
  auto stream = OwnedStream::create(device, "staging");
  if (!stream) return stream.error();
  s.copy_stream_ = std::move(*stream);
  auto staged = OwnedEvent::create(device);
  if (!staged) return staged.error();
  s.staged_ = std::move(*staged);
  auto released = OwnedEvent::create(device);
  if (!released) return released.error();
  s.released_ = std::move(*released);
  return s;
}

void StagedInputs::add(ValueId value, std::string name, size_t bytes, void* spare,
                       std::vector<void**> references) {
  Entry& e = entries_.emplace_back();
  e.value = value;
  e.name = std::move(name);
  e.bytes = bytes;
  e.spare = spare;
  e.references = std::move(references);
}

bool StagedInputs::contains(ValueId value) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.value == value; });
}

Result<void> StagedInputs::check(tdm_status status, const Entry& entry, const char* what) const {
  if (status == TDM_OK) return {};
  return make_error("staging the next '" + entry.name + "' on " + device_->id() + " failed (" + what +
                        "): " + plugin_reason(status),
                    status);
}

Result<void> StagedInputs::stage(ValueId value, const void* host, size_t bytes) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.value == value; });
  Entry& e = *it;  // the executor checked contains()
  const tdm_backend_api& api = *device_->backend().backend;
  if (!e.host.data()) {  // allocated once, at the first staging of this value
    auto staging = HostStaging::allocate(e.bytes, {device_});
    if (!staging) return staging.error();
    e.host = std::move(*staging);
  }
  clear_last_error();
  // The previous staged copy may still read the staging buffer.
  if (ever_staged_)
    if (auto r = check(api.event_synchronize(staged_.get()), e, "waiting for the previous copy"); !r)
      return r;
  std::memcpy(e.host.data(), host, bytes);
  tdm_stream* copy = copy_stream_.get();
  if (ever_released_)
    if (auto r = check(api.stream_wait_event(copy, released_.get()), e, "ordering after its last readers");
        !r)
      return r;
  if (auto r = check(api.copy_h2d(copy, e.spare, e.host.data(), bytes), e, "copy_h2d"); !r) return r;
  if (auto r = check(api.event_record(staged_.get(), copy), e, "recording the copy"); !r) return r;
  ever_staged_ = true;
  e.staged = true;
  return {};
}

Result<void> StagedInputs::use(tdm_stream* compute) {
  const bool any = std::any_of(entries_.begin(), entries_.end(), [](const Entry& e) { return e.staged; });
  if (!any) return {};
  const tdm_backend_api& api = *device_->backend().backend;
  clear_last_error();
  if (auto r = check(api.stream_wait_event(compute, staged_.get()), entries_.front(),
                     "ordering the step after it");
      !r)
    return r;
  for (Entry& e : entries_) {
    if (!e.staged) continue;
    void* current = *e.references.front();
    for (void** reference : e.references) *reference = e.spare;
    e.spare = current;
    e.staged = false;
  }
  // Everything enqueued so far is every reader of the buffers now spare.
  if (auto r = check(api.event_record(released_.get(), compute), entries_.front(), "recording the swap"); !r)
    return r;
  ever_released_ = true;
  return {};
}

void StagedInputs::discard(ValueId value) {
  for (Entry& e : entries_)
    if (e.value == value) e.staged = false;
}

}  // namespace tandem::host::exec
