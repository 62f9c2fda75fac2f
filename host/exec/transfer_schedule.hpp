// Where the copies of a composed executor are issued and waited for: as
// early and as late as the bytes allow. Pure analysis of
// which storage each node reads and writes; composed_executor_run.cpp acts on it.
//
// For a transfer at global slot s from part A (source storage S) to part B
// (destination storage D):
//   issue_after    the last node of A before s that writes S (the value's
//                  producer, or an in-place update of it): the copy may start
//                  right after it. None: at the start of the range that runs
//                  slot s (a parameter, or an input the host wrote).
//   destination_at the first node of B after s that reads or writes D: B
//                  waits for the copy right before it.
//   source_rewritten_at the first node of A after s that writes S: A waits
//                  for the copy right before it (an optimizer's in-place
//                  update of a copied parameter).
//   in_order       the early issue is not safe, so the copy runs at slot s
//                  with both parts synchronised: B touches D before s (the
//                  copy would race with it), or S is itself the destination
//                  of another copy. Placement produces neither today.
// With those three points the bytes copied and the bytes read are exactly
// those of running the schedule strictly in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/graph.hpp"

namespace tandem::host::exec {

inline constexpr size_t kNoPosition = SIZE_MAX;

// What one part's nodes touch, by storage (the planner's owner of each value).
struct PartAccess {
  std::vector<size_t> positions;                    // global position of each local node
  std::vector<std::vector<ValueId>> reads, writes;  // per local node
};

struct TransferEnds {
  size_t slot = 0;
  size_t from_part = 0, to_part = 0;
  ValueId source = kNoValue, destination = kNoValue;  // storages, in their parts
};

struct TransferPoints {
  size_t issue_after = kNoPosition;
  size_t destination_at = kNoPosition;
  size_t source_rewritten_at = kNoPosition;
  bool in_order = false;
};

std::vector<TransferPoints> schedule_transfers(const std::vector<PartAccess>& parts,
                                               const std::vector<TransferEnds>& transfers);

}  // namespace tandem::host::exec
