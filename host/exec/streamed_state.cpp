#include "exec/streamed_state.hpp"

#include <algorithm>
#include <cstdlib>

#include "util/format.hpp"
#include "util/last_error.hpp"

namespace tandem::host::exec {
namespace {

double micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// streamed_state.hpp: by the device, or TANDEM_STREAM_ORDERING.
Result<StreamOrdering> ordering_of(const DeviceHandle& device) {
  if (const char* forced = std::getenv("TANDEM_STREAM_ORDERING"); forced != nullptr && *forced != 0) {
    const std::string text = forced;
    if (text == "events") return StreamOrdering::Events;
    if (text == "worker") return StreamOrdering::Worker;
    return make_error("TANDEM_STREAM_ORDERING='" + text + "': expected events or worker",
                      TDM_INVALID_ARGUMENT);
  }
  auto info = device.info();
  if (!info) return info.error();
  return info->host_addressable ? StreamOrdering::Worker : StreamOrdering::Events;
}

}  // namespace

Result<std::unique_ptr<StreamedState>> StreamedState::create(const DeviceHandle& device, tdm_stream* compute,
                                                             std::vector<Residency> residencies,
                                                             std::vector<void*> homes,
                                                             std::vector<size_t> bytes,
                                                             std::vector<std::string> names, void* arena) {
  std::unique_ptr<StreamedState> s(new StreamedState(device, compute));
  auto ordering = ordering_of(device);
  if (!ordering) return ordering.error();
  s->ordering_ = *ordering;
  auto stream = OwnedStream::create(device, "streaming");
  if (!stream) return stream.error();
  s->copy_ = std::move(*stream);
  s->lanes_.resize(residencies.size());
  const auto make = [&device](OwnedEvent& into) -> Result<void> {
    auto event = OwnedEvent::create(device);
    if (!event) return event.error();
    into = std::move(*event);
    return {};
  };
  for (Lane& lane : s->lanes_)
    for (OwnedEvent* e : {&lane.fetch_ready, &lane.home_ready, &lane.fetch_done, &lane.home_done}) {
      if (s->ordering_ == StreamOrdering::Worker && (e == &lane.fetch_done || e == &lane.home_done)) continue;
      if (auto r = make(*e); !r) return r.error();
    }
  s->residencies_ = std::move(residencies);
  s->homes_ = std::move(homes);
  s->bytes_ = std::move(bytes);
  s->names_ = std::move(names);
  s->arena_ = arena;
  return s;
}

StreamedState::~StreamedState() {
  (void)finish();
  worker_.reset();
}

std::shared_ptr<const StreamedState::Actions> StreamedState::actions_for(size_t first, size_t end) {
  if (auto it = cache_.find({first, end}); it != cache_.end()) return it->second;
  auto a = std::make_shared<Actions>();
  const size_t n = end - first;
  a->wait_home.resize(n);
  a->fetch.resize(n);
  a->wait_fetch.resize(n);
  a->write_home.resize(n);
  for (size_t i = 0; i < residencies_.size(); ++i) {
    const Residency& r = residencies_[i];
    std::vector<Touch> in;
    for (const Touch& t : r.touches)
      if (t.position >= first && t.position < end) in.push_back(t);
    if (in.empty()) continue;
    if (in.front().reads) {
      // Begun before this range: its bytes may be stale, fetch at the start.
      const size_t issue = in.front().position == r.first() ? std::max(r.start, first) : first;
      a->fetch[issue - first].push_back(i);
      a->wait_fetch[in.front().position - first].push_back(i);
    }
    if (std::any_of(in.begin(), in.end(), [](const Touch& t) { return t.writes; })) {
      a->write_home[in.back().position - first].push_back(i);
      if (r.end + 1 < end) a->wait_home[r.end + 1 - first].push_back(i);
    }
  }
  cache_[{first, end}] = a;
  return a;
}

Result<void> StreamedState::begin(size_t first, size_t end) {
  current_ = actions_for(first, end);
  first_ = first;
  return {};
}

Result<void> StreamedState::issue(size_t r, bool fetch) {
  Lane& lane = lanes_[r];
  const OwnedEvent& ready = fetch ? lane.fetch_ready : lane.home_ready;
  clear_last_error();
  tdm_status status = api().event_record(ready.get(), compute_);
  if (status != TDM_OK)
    return make_error("streaming on " + device_->id() +
                          ": cannot record the compute stream's progress: " + plugin_reason(status),
                      status);
  void* slot = static_cast<char*>(arena_) + residencies_[r].offset;
  void* home = homes_[r];
  const size_t bytes = bytes_[r];
  const OwnedEvent* done = nullptr;
  if (ordering_ == StreamOrdering::Events) {
    if (auto queued = enqueue_copy(lane, fetch, slot, home, bytes); !queued) return queued;
    (fetch ? lane.fetch_pending : lane.home_pending) = true;
    done = fetch ? &lane.fetch_done : &lane.home_done;
  }
  // Worker: runs the copy once compute reached `ready`. Events: times the
  // copy the stream runs, from `ready` (or the copy before it) to `done`.
  auto job = [this, &lane, &ready, done, fetch, slot, home, bytes]() -> Result<void> {
    clear_last_error();
    tdm_status s = api().event_synchronize(ready.get());
    const auto start = Clock::now();
    if (s == TDM_OK && done == nullptr) {
      s = fetch ? api().copy_h2d(copy_.get(), slot, home, bytes)
                : api().copy_d2h(copy_.get(), home, slot, bytes);
      if (s == TDM_OK) s = api().stream_synchronize(copy_.get());
    } else if (s == TDM_OK) {
      s = api().event_synchronize(done->get());
    }
    const auto end = Clock::now();
    lane.busy_us += micros(end - start);  // only this thread writes the lane until finish()
    (fetch ? lane.fetch_begin : lane.home_begin) = start;
    (fetch ? lane.fetch_end : lane.home_end) = end;
    if (s != TDM_OK) return copy_failed(fetch, bytes, s);
    return {};
  };
  (fetch ? lane.fetch : lane.home) = worker_->post(std::move(job));
  in_flight_.push_back(r);
  ++stats_.copies;
  (fetch ? stats_.fetched_bytes : stats_.written_home_bytes) += bytes;
  return {};
}

// Events: on the copy stream, after the compute stream's `ready`.
Result<void> StreamedState::enqueue_copy(Lane& lane, bool fetch, void* slot, void* home, size_t bytes) {
  const OwnedEvent& ready = fetch ? lane.fetch_ready : lane.home_ready;
  const OwnedEvent& done = fetch ? lane.fetch_done : lane.home_done;
  clear_last_error();
  tdm_status s = api().stream_wait_event(copy_.get(), ready.get());
  if (s == TDM_OK)
    s = fetch ? api().copy_h2d(copy_.get(), slot, home, bytes)
              : api().copy_d2h(copy_.get(), home, slot, bytes);
  if (s == TDM_OK) s = api().event_record(done.get(), copy_.get());
  if (s != TDM_OK) return copy_failed(fetch, bytes, s);
  return {};
}

Error StreamedState::copy_failed(bool fetch, size_t bytes, tdm_status s) const {
  return make_error(std::string("streaming ") + human_bytes(bytes) + (fetch ? " to " : " from ") +
                        device_->id() + " failed: " + plugin_reason(s),
                    s);
}

Result<void> StreamedState::await(size_t r, bool fetch) {
  Lane& lane = lanes_[r];
  if (ordering_ == StreamOrdering::Worker) return wait(fetch ? lane.fetch : lane.home, true);
  bool& pending = fetch ? lane.fetch_pending : lane.home_pending;
  if (!pending) return {};
  pending = false;
  clear_last_error();
  const tdm_status s = api().stream_wait_event(compute_, (fetch ? lane.fetch_done : lane.home_done).get());
  if (s != TDM_OK)
    return make_error(
        "streaming on " + device_->id() + ": cannot order compute after a copy: " + plugin_reason(s), s);
  return {};
}

Result<void> StreamedState::wait(CopyWorker::Ticket& ticket, bool counts_as_waited) {
  if (!ticket) return {};
  const auto start = Clock::now();
  Result<void> r = worker_->wait(ticket);
  if (counts_as_waited) stats_.waited_us += micros(Clock::now() - start);
  ticket = {};
  return r;
}

Result<void> StreamedState::before(size_t position) {
  const size_t i = position - first_;
  for (size_t r : current_->wait_home[i])
    if (auto w = await(r, false); !w) return w;
  for (size_t r : current_->fetch[i])
    if (auto w = issue(r, true); !w) return w;
  for (size_t r : current_->wait_fetch[i])
    if (auto w = await(r, true); !w) return w;
  return {};
}

Result<void> StreamedState::after(size_t position) {
  for (size_t r : current_->write_home[position - first_])
    if (auto w = issue(r, false); !w) return w;
  return {};
}

void StreamedState::record(size_t r) {
  Lane& lane = lanes_[r];
  for (const bool fetch : {true, false}) {
    Clock::time_point& begin = fetch ? lane.fetch_begin : lane.home_begin;
    const Clock::time_point end = fetch ? lane.fetch_end : lane.home_end;
    if (begin == Clock::time_point{}) continue;
    profile_->copies.push_back(
        {names_[r], fetch, bytes_[r], micros(begin - profile_->epoch), micros(end - begin)});
    begin = {};
  }
}

Result<void> StreamedState::finish() {
  Result<void> first;
  if (ordering_ == StreamOrdering::Events && !in_flight_.empty()) {
    // The range's tail: the copies compute did not hide.
    const auto start = Clock::now();
    clear_last_error();
    const tdm_status s = api().stream_synchronize(copy_.get());
    stats_.waited_us += micros(Clock::now() - start);
    if (s != TDM_OK) first = make_error("streaming on " + device_->id() + " failed: " + plugin_reason(s), s);
  }
  for (size_t r : in_flight_) {
    Lane& lane = lanes_[r];
    lane.fetch_pending = lane.home_pending = false;
    // Worker: waiting here is the range's tail. Events: the observer's timing.
    for (CopyWorker::Ticket* t : {&lane.fetch, &lane.home})
      if (auto w = wait(*t, ordering_ == StreamOrdering::Worker); !w && first) first = w;
    stats_.busy_us += lane.busy_us;
    lane.busy_us = 0;
    if (profile_ != nullptr) record(r);
  }
  in_flight_.clear();
  return first;
}

}  // namespace tandem::host::exec
