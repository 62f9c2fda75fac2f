// A composed executor: the parts of a graph placed on several devices, one
// executor each, run in the global schedule with the copies between them.
//
// Copies overlap compute (issue #5, point 5). Each transfer is issued as
// early as its bytes allow — right after the last node that writes its
// source (its producer), or at the start of the range for a value nobody in
// it produces (a parameter, an input the host wrote) — and waited for as
// late as they allow: by the destination part right before its first node
// that reads the copy, and by the source part right before a node that
// overwrites the source (an in-place update). transfer_schedule.hpp finds
// those points, copy_engine.hpp moves the bytes on copy streams with events,
// or with a memcpy on a copy thread between host-addressable devices.
//
// Parts launch their nodes without synchronising (Executor::launch_range);
// run() synchronises every part and finishes every copy it issued before it
// returns, and reports a copy's error there. Why the bytes are right:
//   - a source is not overwritten before the copy read it: a value another
//     device reads is among its part's `exported` (split.hpp), which the
//     placed executor makes an output of the part, so the arena planner keeps
//     its bytes live to the end of the schedule and never lets an in-place
//     op clobber it (planner.hpp); persistent sources (parameters) are
//     guarded by the source-side wait before their in-place update;
//   - a destination (an input of the consumer part) is not rewritten by the
//     next step's copy before its readers ran: run() synchronised first;
//   - the host reads nothing before run() returns.
// TransferOptions::sequential (or TANDEM_SEQUENTIAL_COPIES=1) runs every
// copy at its own slot with the host waiting, the parts synchronising each
// range: the old behaviour, for debugging and as the bit-exact reference.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "exec/executor.hpp"

namespace tandem::host::exec {
namespace {

bool sequential_copies_from_environment() {
  const char* v = std::getenv("TANDEM_SEQUENTIAL_COPIES");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace

struct Executor::RangeActions {
  std::vector<size_t> at_start;                                   // transfers issued before the first slot
  std::vector<std::vector<size_t>> issue_after;                   // per slot: transfers issued after it
  std::vector<std::vector<std::pair<size_t, bool>>> wait_before;  // per slot: (transfer, in the source part)
};

Executor::Executor() : stream_(nullptr, StreamDeleter{}) {}

std::unique_ptr<Executor> Executor::compose(std::vector<ExecutorPart> parts,
                                            std::vector<ExecutorTransfer> transfers, size_t global_nodes,
                                            std::map<ValueId, std::pair<size_t, ValueId>> owner) {
  std::unique_ptr<Executor> e(new Executor());
  e->slots_.assign(global_nodes, Slot{});
  std::vector<PartAccess> access(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) {
    const Executor& part = *parts[p].executor;
    const auto storage = [&](const std::vector<ValueId>& values) {
      std::vector<ValueId> owners;
      for (ValueId v : values)
        if (const ValueStorage* s = v == kNoValue ? nullptr : part.plan_.find(v)) owners.push_back(s->owner);
      return owners;
    };
    access[p].positions = parts[p].positions;
    for (size_t local = 0; local < parts[p].positions.size(); ++local) {
      e->slots_[parts[p].positions[local]] = Slot{false, p, local};
      access[p].reads.push_back(storage(part.nodes_[local].reads));
      access[p].writes.push_back(storage(part.nodes_[local].writes));
    }
  }
  std::vector<TransferEnds> ends;
  for (size_t t = 0; t < transfers.size(); ++t) {
    const ExecutorTransfer& x = transfers[t];
    e->slots_[x.position] = Slot{true, t, 0};
    ends.push_back({x.position, x.from_part, x.to_part,
                    parts[x.from_part].executor->plan_.find(x.from)->owner,
                    parts[x.to_part].executor->plan_.find(x.to)->owner});
  }
  const std::vector<TransferPoints> points = schedule_transfers(access, ends);
  for (size_t t = 0; t < transfers.size(); ++t) transfers[t].points = points[t];
  for (const ExecutorPart& part : parts) e->allocated_ += part.executor->allocated_bytes();
  e->parts_ = std::move(parts);
  e->transfers_ = std::move(transfers);
  e->owner_ = std::move(owner);
  e->events_taken_.assign(e->parts_.size(), 0);
  e->node_time_us_.assign(global_nodes, 0.0);
  e->transfer_options_.sequential = sequential_copies_from_environment();
  e->assign_routes();
  return e;
}

void Executor::assign_routes() {
  for (ExecutorTransfer& t : transfers_)
    t.route = route_between(part_host_addressable(t.from_part), part_host_addressable(t.to_part));
}

bool Executor::part_host_addressable(size_t part) const {
  const ExecutorPart& p = parts_[part];
  if (transfer_options_.as_device.count(p.device) > 0) return false;
  const auto info = p.executor->device_->info();
  return info && info->host_addressable;
}

Result<void> Executor::set_transfer_options(TransferOptions options) {
  if (parts_.empty())
    return make_error("transfer options apply to an executor composed of several devices; this one has one",
                      TDM_INVALID_ARGUMENT);
  if (copies_) {
    Result<void> finished = copies_->finish();
    retired_busy_us_ += copies_->busy_us();
    retired_wait_us_ += copies_->waited_us();
    copies_.reset();
    if (!finished) return finished;
  }
  transfer_options_ = std::move(options);
  assign_routes();
  return {};
}

Result<void> Executor::start_copies() {
  if (copies_) return {};
  std::vector<CopyPart> parts;
  for (size_t p = 0; p < parts_.size(); ++p)
    parts.push_back(
        {parts_[p].executor->device_, parts_[p].executor->stream_.get(), part_host_addressable(p)});
  std::vector<CopyRequest> requests;
  for (const ExecutorTransfer& t : transfers_) {
    // The destination is named value@device (split.hpp): messages say the value.
    const Executor& to = *parts_[t.to_part].executor;
    std::string name = to.plan_.persistent[to.plan_.find(t.to)->persistent].name;
    if (const size_t at = name.rfind('@'); at != std::string::npos) name.resize(at);
    requests.push_back({t.from_part, t.to_part, t.bytes, std::move(name)});
  }
  auto engine = CopyEngine::create(std::move(parts), std::move(requests));
  if (!engine) return engine.error();
  copies_ = std::move(*engine);
  return {};
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
  if (auto r = start_copies(); !r) return r;
  Result<void> ran =
      transfer_options_.sequential ? run_parts_in_order(first, end) : run_parts_overlapped(first, end);
  // Even after a failure: nothing may still run when run() returns.
  Result<void> finished = finish_parts();
  return !ran ? ran : finished;
}

Result<void> Executor::run_parts_in_order(size_t first, size_t end) {
  for (size_t p = first; p < end;) {
    const Slot& s = slots_[p];
    if (s.transfer) {
      if (auto r = transfer_in_order(s.part); !r) return r;
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

Executor::RangeActions Executor::plan_range(size_t first, size_t end) const {
  RangeActions a;
  a.issue_after.resize(end - first);
  a.wait_before.resize(end - first);
  for (size_t t = 0; t < transfers_.size(); ++t) {
    const ExecutorTransfer& x = transfers_[t];
    // A range runs the copies whose slots it holds, whatever ran before.
    if (x.position < first || x.position >= end || x.points.in_order) continue;
    const TransferPoints& at = x.points;
    if (at.issue_after == kNoPosition || at.issue_after < first)
      a.at_start.push_back(t);
    else
      a.issue_after[at.issue_after - first].push_back(t);
    // Beyond the range: the waits of finish_parts() cover them.
    if (at.destination_at < end) a.wait_before[at.destination_at - first].push_back({t, false});
    if (at.source_rewritten_at < end) a.wait_before[at.source_rewritten_at - first].push_back({t, true});
  }
  return a;
}

const Executor::RangeActions& Executor::range_actions(size_t first, size_t end) {
  std::shared_ptr<const RangeActions>& a = range_actions_[{first, end}];
  if (!a) a = std::make_shared<const RangeActions>(plan_range(first, end));
  return *a;
}

Result<void> Executor::run_parts_overlapped(size_t first, size_t end) {
  const RangeActions& a = range_actions(first, end);
  for (size_t t : a.at_start)
    if (auto r = issue_transfer(t); !r) return r;
  for (size_t p = first; p < end;) {
    for (const auto& [t, in_source] : a.wait_before[p - first])
      if (auto r = in_source ? copies_->wait_in_source(t) : copies_->wait_in_destination(t); !r) return r;
    const Slot& s = slots_[p];
    if (s.transfer) {  // issued earlier, unless it must run in order
      if (transfers_[s.part].points.in_order)
        if (auto r = transfer_in_order(s.part); !r) return r;
      ++p;
      continue;
    }
    // The longest run of this part's consecutive nodes with no copy issued
    // or waited for in between.
    size_t q = p + 1;
    while (q < end && !slots_[q].transfer && slots_[q].part == s.part &&
           slots_[q].local == s.local + (q - p) && a.wait_before[q - first].empty() &&
           a.issue_after[q - 1 - first].empty())
      ++q;
    if (auto r = parts_[s.part].executor->launch_range(s.local, s.local + (q - p)); !r) return r;
    collect_profile(s.part, p, q);
    for (size_t t : a.issue_after[q - 1 - first])
      if (auto r = issue_transfer(t); !r) return r;
    p = q;
  }
  return {};
}

Result<void> Executor::issue_transfer(size_t t) {
  const ExecutorTransfer& x = transfers_[t];
  // Addresses now, not at compose: a staged input swaps its buffers.
  void* dst = parts_[x.to_part].executor->device_pointer(x.to);
  const void* src = parts_[x.from_part].executor->device_pointer(x.from);
  if (auto r = copies_->issue(t, dst, src); !r) return r;
  ++transfers_run_;
  transferred_bytes_ += x.bytes;
  return {};
}

Result<void> Executor::transfer_in_order(size_t t) {
  const ExecutorTransfer& x = transfers_[t];
  if (auto r = parts_[x.from_part].executor->synchronize(); !r) return r;
  if (auto r = parts_[x.to_part].executor->synchronize(); !r) return r;
  if (auto r = issue_transfer(t); !r) return r;
  return copies_->wait_in_order(t);
}

Result<void> Executor::finish_parts() {
  Result<void> first;
  for (const ExecutorPart& part : parts_)
    if (auto r = part.executor->synchronize(); !r && first) first = r;
  if (copies_)
    if (auto r = copies_->finish(); !r && first) first = r;
  return first;
}

double Executor::transfer_busy_us() const noexcept {
  return retired_busy_us_ + (copies_ ? copies_->busy_us() : 0.0);
}

double Executor::transfer_wait_us() const noexcept {
  return retired_wait_us_ + (copies_ ? copies_->waited_us() : 0.0);
}

double Executor::hidden_transfer_fraction() const noexcept {
  const double busy = transfer_busy_us();
  if (busy <= 0) return 0.0;
  return std::clamp(1.0 - transfer_wait_us() / busy, 0.0, 1.0);
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
