#include "exec/transfer_schedule.hpp"

#include <algorithm>

namespace tandem::host::exec {
namespace {

bool touches(const std::vector<ValueId>& storages, ValueId storage) {
  return std::find(storages.begin(), storages.end(), storage) != storages.end();
}

}  // namespace

std::vector<TransferPoints> schedule_transfers(const std::vector<PartAccess>& parts,
                                               const std::vector<TransferEnds>& transfers) {
  std::vector<TransferPoints> points(transfers.size());
  for (size_t t = 0; t < transfers.size(); ++t) {
    const TransferEnds& x = transfers[t];
    TransferPoints& p = points[t];
    const PartAccess& from = parts[x.from_part];
    const PartAccess& to = parts[x.to_part];
    for (size_t local = 0; local < from.positions.size(); ++local) {
      const size_t at = from.positions[local];
      if (!touches(from.writes[local], x.source)) continue;
      if (at < x.slot)
        p.issue_after = p.issue_after == kNoPosition ? at : std::max(p.issue_after, at);
      else if (p.source_rewritten_at == kNoPosition)
        p.source_rewritten_at = at;
    }
    for (size_t local = 0; local < to.positions.size(); ++local) {
      const size_t at = to.positions[local];
      if (!touches(to.reads[local], x.destination) && !touches(to.writes[local], x.destination)) continue;
      if (at < x.slot)
        p.in_order = true;
      else if (p.destination_at == kNoPosition)
        p.destination_at = at;
    }
    for (const TransferEnds& other : transfers)
      if (other.to_part == x.from_part && other.destination == x.source) p.in_order = true;
  }
  return points;
}

}  // namespace tandem::host::exec
