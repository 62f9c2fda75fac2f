// The onednn plugin's split of the process's CPUs into devices
// (plugins/onednn/cpu_groups.cpp, compiled into this binary): the cpulist
// notation, the even split, the NUMA nodes read from a sysfs-like directory
// made here, and which values of "plugins.onednn.devices" are refused.
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cpu_groups.hpp"

using tandem::onednn::CpuList;
namespace od = tandem::onednn;

TEST(OnednnCpuGroups, ParsesAndWritesTheKernelsListNotation) {
  EXPECT_EQ(od::parse_cpu_list("0-3,8,10-11\n"), (CpuList{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(od::parse_cpu_list(""), CpuList{});  // a node with memory only
  EXPECT_EQ(od::parse_cpu_list("5"), CpuList{5});
  for (const char* bad : {"3-1", "a", "1,,2", "0,", "-1", "1-", "0-2x", "99999999"})
    EXPECT_FALSE(od::parse_cpu_list(bad)) << bad;
  EXPECT_EQ(od::cpu_list_str({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(od::cpu_list_str({4}), "4");
  EXPECT_EQ(od::cpu_list_str({}), "");
}

TEST(OnednnCpuGroups, SplitsEvenlyLargerGroupsFirst) {
  const CpuList five{0, 1, 2, 5, 6};
  EXPECT_EQ(od::split_evenly(five, 1), std::vector<CpuList>{five});
  EXPECT_EQ(od::split_evenly(five, 2), (std::vector<CpuList>{{0, 1, 2}, {5, 6}}));
  EXPECT_EQ(od::split_evenly(five, 3), (std::vector<CpuList>{{0, 1}, {2, 5}, {6}}));
  EXPECT_EQ(od::split_evenly(five, 5), (std::vector<CpuList>{{0}, {1}, {2}, {5}, {6}}));
}

namespace {

// A directory laid out like /sys/devices/system/node, removed at the end.
struct FakeNodes {
  std::filesystem::path dir;
  FakeNodes() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tandem-onednn-nodes-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) dir = pattern;
  }
  ~FakeNodes() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  void node(const std::string& name, const std::string& cpulist) {
    std::filesystem::create_directories(dir / name);
    std::ofstream(dir / name / "cpulist") << cpulist << "\n";
  }
};

}  // namespace

TEST(OnednnCpuGroups, OneGroupPerNumaNodeWithAllowedCpus) {
  FakeNodes sys;
  ASSERT_FALSE(sys.dir.empty()) << "cannot make a temporary directory";
  sys.node("node0", "0-3");
  sys.node("node1", "4-7");
  sys.node("node2", "");  // memory only
  sys.node("node10", "8-9");
  sys.node("nodeX", "12");  // not a node directory
  std::filesystem::create_directories(sys.dir / "power");
  EXPECT_EQ(od::numa_groups({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, sys.dir.string()),
            (std::vector<CpuList>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  // Only the CPUs of the affinity mask; a node without any gives no device.
  EXPECT_EQ(od::numa_groups({1, 2, 9}, sys.dir.string()), (std::vector<CpuList>{{1, 2}, {9}}));
  EXPECT_EQ(od::numa_groups({5}, sys.dir.string()), (std::vector<CpuList>{{5}}));
  // No nodes to read: one group of every CPU.
  EXPECT_EQ(od::numa_groups({0, 1}, (sys.dir / "absent").string()), (std::vector<CpuList>{{0, 1}}));
  const od::DeviceGroups numa = od::device_groups("numa", {0, 1, 4}, sys.dir.string());
  EXPECT_TRUE(numa.error.empty()) << numa.error;
  EXPECT_EQ(numa.groups, (std::vector<CpuList>{{0, 1}, {4}}));
}

TEST(OnednnCpuGroups, DevicesValueIsACountUpToTheCpusOrNuma) {
  const CpuList four{0, 1, 2, 3};
  const od::DeviceGroups two = od::device_groups("2", four);
  EXPECT_TRUE(two.error.empty()) << two.error;
  EXPECT_EQ(two.groups, (std::vector<CpuList>{{0, 1}, {2, 3}}));
  for (const char* bad : {"0", "-1", "two", "2.5", "", " 2", "numa2"}) {
    const od::DeviceGroups g = od::device_groups(bad, four);
    EXPECT_TRUE(g.groups.empty()) << bad;
    EXPECT_NE(g.error.find(std::string("onednn.devices=") + bad + " is not a whole number from 1 to 4"),
              std::string::npos)
        << g.error;
    EXPECT_NE(g.error.find("numa"), std::string::npos) << g.error;
  }
  const od::DeviceGroups five = od::device_groups("5", four);
  EXPECT_TRUE(five.groups.empty());
  EXPECT_NE(five.error.find("onednn.devices=5 asks for more devices than the 4 CPU(s)"), std::string::npos)
      << five.error;
}

TEST(OnednnCpuGroups, AffinityCpusAreThisThreadsMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    GTEST_SKIP() << "sched_getaffinity needs a wider mask here";
  CpuList want;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) want.push_back(c);
  EXPECT_EQ(od::affinity_cpus(), want);
}
