// Where copies are issued and waited for, on hand-made access lists: right
// after the last writer of the source before the copy's slot, before the
// destination's first reader, before the source's next in-place writer; in
// order where an early issue would race.
#include <gtest/gtest.h>

#include "exec/transfer_schedule.hpp"

namespace tandem::test {
namespace {

using host::exec::kNoPosition;
using host::exec::PartAccess;
using host::exec::schedule_transfers;
using host::exec::TransferEnds;

// Part 0 ("GPU"): 0 writes 10, 1 writes 11 (reads 10), 5 updates 10 in place.
// Part 1 ("CPU"): 3 reads 20, 4 writes 21 reading 20, 6 reads 22.
// Slots 2 (10 -> 20) and 7... are copies.
std::vector<PartAccess> parts() {
  PartAccess gpu{{0, 1, 5}, {{}, {10}, {10, 12}}, {{10}, {11}, {10}}};
  PartAccess cpu{{3, 4, 8}, {{20}, {20}, {22}}, {{23}, {21}, {24}}};
  return {gpu, cpu};
}

TEST(TransferSchedule, IssuedAfterTheProducerWaitedBeforeTheFirstReaderAndTheNextOverwrite) {
  const auto points = schedule_transfers(parts(), {TransferEnds{2, 0, 1, 10, 20}});
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].issue_after, 0u);          // node 0 produced 10
  EXPECT_EQ(points[0].destination_at, 3u);       // node 3 reads 20 first
  EXPECT_EQ(points[0].source_rewritten_at, 5u);  // node 5 updates 10 in place
  EXPECT_FALSE(points[0].in_order);
}

TEST(TransferSchedule, AValueNobodyProducesStartsWithTheRange) {
  // 12 (read by node 5, written by nobody) to 22, first read at 8.
  const auto points = schedule_transfers(parts(), {TransferEnds{7, 0, 1, 12, 22}});
  EXPECT_EQ(points[0].issue_after, kNoPosition);
  EXPECT_EQ(points[0].destination_at, 8u);
  EXPECT_EQ(points[0].source_rewritten_at, kNoPosition);
  EXPECT_FALSE(points[0].in_order);
}

TEST(TransferSchedule, ACopyThatWouldRaceRunsInOrder) {
  // 20 is read at node 3, before this copy's slot 7 writes it again.
  const auto war = schedule_transfers(parts(), {TransferEnds{7, 0, 1, 11, 20}});
  EXPECT_TRUE(war[0].in_order);
  // A copy of a copy's destination: 21 on part 1 is where another copy lands.
  const auto chained =
      schedule_transfers(parts(), {TransferEnds{2, 0, 1, 11, 21}, TransferEnds{7, 1, 0, 21, 13}});
  EXPECT_TRUE(chained[1].in_order);
}

}  // namespace
}  // namespace tandem::test
