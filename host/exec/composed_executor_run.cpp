// Running a range of a ComposedExecutor's global schedule: the parts' nodes
// and the copies between them.
//
// Copies overlap compute. Each transfer is issued as
// early as its bytes allow — right after the last node that writes its
// source (its producer), or at the start of the range for a value nobody in
// it produces (a parameter, an input the host wrote) — and waited for as
// late as they allow: by the destination part right before its first node
// that reads the copy, and by the source part right before a node that
// overwrites the source (an in-place update). transfer_schedule.hpp finds
// those points, copy_engine.hpp moves the bytes on copy streams with events,
// or with a memcpy on a copy thread between host-addressable devices.
//
// Parts launch their nodes without synchronising
// (DeviceExecutor::launch_range); run() synchronises every part and
// finishes every copy it issued before it returns, and reports a copy's
// error there. Why the bytes are right:
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
#include <memory>
#include <string>
#include <vector>

#include "exec/composed_executor.hpp"

namespace tandem::host::exec {

struct ComposedExecutor::RangeActions {
  std::vector<size_t> at_start;                                   // transfers issued before the first slot
  std::vector<std::vector<size_t>> issue_after;                   // per slot: transfers issued after it
  std::vector<std::vector<std::pair<size_t, bool>>> wait_before;  // per slot: (transfer, in the source part)
};

Result<void> ComposedExecutor::run(size_t first, size_t end) {
  if (first > end || end > slots_.size())
    return make_error("run [" + std::to_string(first) + ", " + std::to_string(end) +
                          ") is outside the schedule of " + std::to_string(slots_.size()) + " nodes",
                      TDM_INVALID_ARGUMENT);
  if (auto r = start_copies(); !r) return r;
  Result<void> ran = transfer_options_.sequential ? run_in_order(first, end) : run_overlapped(first, end);
  // Even after a failure: nothing may still run when run() returns.
  Result<void> finished = synchronize();
  return !ran ? ran : finished;
}

Result<void> ComposedExecutor::run_in_order(size_t first, size_t end) {
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

ComposedExecutor::RangeActions ComposedExecutor::plan_range(size_t first, size_t end) const {
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
    // Beyond the range: the waits of synchronize() cover them.
    if (at.destination_at < end) a.wait_before[at.destination_at - first].push_back({t, false});
    if (at.source_rewritten_at < end) a.wait_before[at.source_rewritten_at - first].push_back({t, true});
  }
  return a;
}

const ComposedExecutor::RangeActions& ComposedExecutor::range_actions(size_t first, size_t end) {
  std::shared_ptr<const RangeActions>& a = range_actions_[{first, end}];
  if (!a) a = std::make_shared<const RangeActions>(plan_range(first, end));
  return *a;
}

Result<void> ComposedExecutor::run_overlapped(size_t first, size_t end) {
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

Result<void> ComposedExecutor::issue_transfer(size_t t) {
  const ExecutorTransfer& x = transfers_[t];
  // Addresses now, not at compose: a staged input swaps its buffers.
  void* dst = parts_[x.to_part].executor->device_pointer(x.to);
  const void* src = parts_[x.from_part].executor->device_pointer(x.from);
  if (auto r = copies_->issue(t, dst, src); !r) return r;
  ++transfers_run_;
  transferred_bytes_ += x.bytes;
  return {};
}

Result<void> ComposedExecutor::transfer_in_order(size_t t) {
  const ExecutorTransfer& x = transfers_[t];
  if (auto r = parts_[x.from_part].executor->synchronize(); !r) return r;
  if (auto r = parts_[x.to_part].executor->synchronize(); !r) return r;
  if (auto r = issue_transfer(t); !r) return r;
  return copies_->wait_in_order(t);
}

Result<void> ComposedExecutor::synchronize() {
  Result<void> first;
  for (const ExecutorPart& part : parts_)
    if (auto r = part.executor->synchronize(); !r && first) first = r;
  if (copies_)
    if (auto r = copies_->finish(); !r && first) first = r;
  return first;
}

}  // namespace tandem::host::exec
