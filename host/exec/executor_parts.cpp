// A composed executor: the parts of a graph placed on several devices, one
// executor each, run in the global schedule with the copies between them.
//
// Each part synchronises at the end of every range it runs, so a copy reads
// finished bytes. Between two host-addressable devices a copy is a memcpy;
// otherwise it goes through host memory (read from one part, write to the
// other). Copies are not yet overlapped with compute (issue #5, point 5).
#include <cstring>
#include <vector>

#include "exec/executor.hpp"

namespace tandem::host::exec {

Executor::Executor() : stream_(nullptr, StreamDeleter{}) {}

std::unique_ptr<Executor> Executor::compose(std::vector<ExecutorPart> parts,
                                            std::vector<ExecutorTransfer> transfers, size_t global_nodes,
                                            std::map<ValueId, std::pair<size_t, ValueId>> owner) {
  std::unique_ptr<Executor> e(new Executor());
  e->slots_.assign(global_nodes, Slot{});
  for (size_t p = 0; p < parts.size(); ++p)
    for (size_t local = 0; local < parts[p].positions.size(); ++local)
      e->slots_[parts[p].positions[local]] = Slot{false, p, local};
  const auto addressable = [&](size_t part) {
    const auto info = parts[part].executor->device_->info();
    return info && info->host_addressable;
  };
  for (size_t t = 0; t < transfers.size(); ++t) {
    e->slots_[transfers[t].position] = Slot{true, t, 0};
    transfers[t].memcpy = addressable(transfers[t].from_part) && addressable(transfers[t].to_part);
  }
  for (const ExecutorPart& part : parts) e->allocated_ += part.executor->allocated_bytes();
  e->parts_ = std::move(parts);
  e->transfers_ = std::move(transfers);
  e->owner_ = std::move(owner);
  e->events_taken_.assign(e->parts_.size(), 0);
  e->node_time_us_.assign(global_nodes, 0.0);
  return e;
}

Result<std::pair<Executor*, ValueId>> Executor::owner_of(ValueId value) const {
  auto it = owner_.find(value);
  if (it == owner_.end())
    return make_error("value " + std::to_string(value) + " is held by no device of this run",
                      TDM_INVALID_ARGUMENT);
  return std::make_pair(parts_[it->second.first].executor.get(), it->second.second);
}

Result<void> Executor::run_parts(size_t first, size_t end) {
  if (first > end || end > slots_.size())
    return make_error("run [" + std::to_string(first) + ", " + std::to_string(end) +
                          ") is outside the schedule of " + std::to_string(slots_.size()) + " nodes",
                      TDM_INVALID_ARGUMENT);
  for (size_t p = first; p < end;) {
    const Slot& s = slots_[p];
    if (s.transfer) {
      if (auto r = transfer(transfers_[s.part]); !r) return r;
      ++p;
      continue;
    }
    // The longest run of this part's consecutive nodes.
    size_t q = p + 1;
    while (q < end && !slots_[q].transfer && slots_[q].part == s.part && slots_[q].local == s.local + (q - p))
      ++q;
    if (auto r = parts_[s.part].executor->run(s.local, s.local + (q - p)); !r) return r;
    collect_profile(s.part, p, q);
    p = q;
  }
  return {};
}

Result<void> Executor::transfer(const ExecutorTransfer& t) {
  Executor& from = *parts_[t.from_part].executor;
  Executor& to = *parts_[t.to_part].executor;
  if (t.memcpy) {
    std::memcpy(to.device_pointer(t.to), from.device_pointer(t.from), t.bytes);
  } else {
    std::vector<unsigned char> staging(t.bytes);
    if (auto r = from.read(t.from, staging.data(), t.bytes); !r) return r;
    if (auto r = to.write(t.to, staging.data(), t.bytes); !r) return r;
  }
  ++transfers_run_;
  transferred_bytes_ += t.bytes;
  return {};
}

void Executor::collect_profile(size_t part, size_t first, size_t end) {
  const Executor& e = *parts_[part].executor;
  const std::vector<size_t>& positions = parts_[part].positions;
  for (size_t p = first; p < end; ++p) node_time_us_[p] = e.node_time_us()[slots_[p].local];
  const double shift = std::chrono::duration<double, std::micro>(e.profile_epoch() - epoch_).count();
  const auto& events = e.profile_events();
  for (size_t i = events_taken_[part]; i < events.size(); ++i)
    events_.push_back({positions[events[i].node], events[i].start_us + shift, events[i].dur_us});
  events_taken_[part] = events.size();
}

}  // namespace tandem::host::exec
