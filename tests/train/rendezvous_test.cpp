// The file rendezvous that hands rank 0's NCCL id to the other ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "plugin/host_services.hpp"
#include "plugin/registry.hpp"
#include "temp_dir.hpp"
#include "train/rendezvous.hpp"

namespace tandem::test {
namespace {

using host::train::ProcessGroup;

TEST(Rendezvous, AFileCarriesRankZerosBytesToTheOthers) {
  TempDir dir;
  const std::string how = "file://" + dir.file("id");
  host::HostServices services;
  host::PluginRegistry registry(services);
  std::vector<unsigned char> received;
  host::Result<void> waited;
  std::thread rank1([&] {
    waited = host::train::rendezvous(how, registry, ProcessGroup{1, 2, 1, 0, "env"}, received, 10);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 1 is waiting by now
  std::vector<unsigned char> id = {0, 1, 2, 255, 0, 7};
  ASSERT_TRUE(host::train::rendezvous(how, registry, ProcessGroup{0, 2, 0, 0, "env"}, id, 10).ok());
  rank1.join();
  ASSERT_TRUE(waited.ok()) << waited.error().message;
  EXPECT_EQ(received, id);
}

// Two groups of two ranks (data and tensor parallelism together): each
// group's rank 0 hands its own bytes to its own rank 1, through a file of
// its own beside the path given.
TEST(Rendezvous, EachGroupGetsItsOwnRankZerosBytes) {
  TempDir dir;
  const std::string how = "file://" + dir.file("id");
  host::HostServices services;
  host::PluginRegistry registry(services);
  std::vector<unsigned char> received[2];
  host::Result<void> waited[2];
  std::vector<std::thread> second_ranks;
  for (int32_t part = 0; part < 2; ++part)
    second_ranks.emplace_back([&, part] {
      waited[part] =
          host::train::rendezvous(how, registry, ProcessGroup{1, 2, 1, 0, "env"}, received[part], 10, part);
    });
  const std::vector<unsigned char> ids[2] = {{10, 11, 12}, {20, 21}};
  for (int32_t part = 1; part >= 0; --part) {
    std::vector<unsigned char> id = ids[part];
    ASSERT_TRUE(host::train::rendezvous(how, registry, ProcessGroup{0, 2, 0, 0, "env"}, id, 10, part).ok());
  }
  for (std::thread& t : second_ranks) t.join();
  for (int32_t part = 0; part < 2; ++part) {
    ASSERT_TRUE(waited[part].ok()) << waited[part].error().message;
    EXPECT_EQ(received[part], ids[part]) << "group " << part;
    EXPECT_TRUE(std::filesystem::exists(dir.file("id") + ".group-" + std::to_string(part)));
  }
}

TEST(Rendezvous, RankZeroRefusesAFileLeftByAnEarlierJob) {
  TempDir dir;
  const std::string how = "file://" + dir.file("id");
  host::HostServices services;
  host::PluginRegistry registry(services);
  std::vector<unsigned char> id = {1, 2, 3};
  ASSERT_TRUE(host::train::rendezvous(how, registry, ProcessGroup{0, 2, 0, 0, "env"}, id, 1).ok());
  auto again = host::train::rendezvous(how, registry, ProcessGroup{0, 2, 0, 0, "env"}, id, 1);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("already exists"), std::string::npos) << again.error().message;
  EXPECT_NE(again.error().message.find(dir.file("id")), std::string::npos) << again.error().message;
}

TEST(Rendezvous, AWaitingRankGivesUpWithAReasonAfterTheTimeout) {
  TempDir dir;
  host::HostServices services;
  host::PluginRegistry registry(services);
  std::vector<unsigned char> id;
  auto r = host::train::rendezvous("file://" + dir.file("never"), registry, ProcessGroup{1, 2, 1, 0, "env"},
                                   id, 0.2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, TDM_TIMEOUT);
  EXPECT_NE(r.error().message.find("rank 1 waited"), std::string::npos) << r.error().message;
  auto bad = host::train::rendezvous("tcp://host:1234", registry, ProcessGroup{1, 2, 1, 0, "env"}, id, 0.2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("expected 'mpi' or file:///"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace tandem::test
