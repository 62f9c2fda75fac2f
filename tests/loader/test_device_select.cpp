// Which GPU each process of a multi-process run takes: local rank r gets
// GPU r of its node, and a node with more processes than GPUs (or every
// process naming the same GPU) is refused before any communicator exists.
// The test backend reports N devices of kind GPU (plugins.testgood.gpus).
#include <gtest/gtest.h>

#include <string>

#include "program/device_select.hpp"
#include "program/process_group.hpp"
#include "test_support.hpp"

namespace tandem::test {
namespace {

using host::program::ProcessGroup;
using host::program::select_device;

ProcessGroup node_of(int rank, int local_rank, int local_world, int world) {
  return ProcessGroup{rank, world, local_rank, local_world, "mpirun"};
}

TEST(DeviceSelect, LocalRankTakesItsOwnGpu) {
  Loaded l("good", "testgood", {{"plugins.testgood.gpus", "2"}});
  for (int r = 0; r < 2; ++r) {
    for (const std::string wanted : {"", "gpu", "testgood"}) {
      auto d = select_device(*l.registry, wanted, node_of(r, r, 2, 2));
      ASSERT_TRUE(d.ok()) << "'" << wanted << "': " << d.error().message;
      EXPECT_EQ(d->index(), uint32_t(r)) << "'" << wanted << "', local rank " << r;
    }
  }
  // A second node: its local rank 1 is global rank 3.
  auto d = select_device(*l.registry, "gpu", node_of(3, 1, 2, 4));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->index(), 1u);
}

TEST(DeviceSelect, MoreProcessesOnANodeThanGpusIsRefused) {
  Loaded l("good", "testgood", {{"plugins.testgood.gpus", "2"}});
  // Local rank 0 of three: its own GPU exists, but rank 2 would have none,
  // so every rank refuses alike rather than one rank hanging in the rendezvous.
  for (int r = 0; r < 3; ++r) {
    auto d = select_device(*l.registry, "gpu", node_of(r, r, 3, 3));
    ASSERT_FALSE(d.ok()) << "local rank " << r << " was given " << d->id();
    EXPECT_NE(d.error().message.find("3 processes on this node but 2 GPUs (testgood:0, testgood:1)"),
              std::string::npos)
        << d.error().message;
    EXPECT_NE(d.error().message.find("--npernode 2"), std::string::npos) << d.error().message;
  }
  // A launcher that does not say how many processes share the node: the
  // rank that falls off the end still refuses.
  auto beyond = select_device(*l.registry, "gpu", node_of(2, 2, 0, 3));
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.error().message.find("3 processes on this node but 2 GPUs"), std::string::npos)
      << beyond.error().message;
}

TEST(DeviceSelect, EveryProcessNamingOneGpuIsRefused) {
  Loaded l("good", "testgood", {{"plugins.testgood.gpus", "2"}});
  auto d = select_device(*l.registry, "testgood:1", node_of(0, 0, 2, 2));
  ASSERT_FALSE(d.ok()) << "given " << d->id();
  EXPECT_NE(d.error().message.find("every one of the 2 processes on this node would use testgood:1"),
            std::string::npos)
      << d.error().message;
  EXPECT_NE(d.error().message.find("--device testgood"), std::string::npos) << d.error().message;
}

TEST(DeviceSelect, OneProcessOrOneVisibleGpuKeepsTheNamedDevice) {
  // A single process may name any GPU.
  Loaded two("good", "testgood", {{"plugins.testgood.gpus", "2"}});
  auto named = select_device(*two.registry, "testgood:1", ProcessGroup{});
  ASSERT_TRUE(named.ok()) << named.error().message;
  EXPECT_EQ(named->index(), 1u);
  // One visible GPU per process (CUDA_VISIBLE_DEVICES set per rank): each
  // rank's GPU 0 is its own.
  Loaded one("good", "testgood", {{"plugins.testgood.gpus", "1"}});
  auto own = select_device(*one.registry, "gpu", node_of(1, 1, 2, 2));
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_EQ(own->index(), 0u);
}

}  // namespace
}  // namespace tandem::test
