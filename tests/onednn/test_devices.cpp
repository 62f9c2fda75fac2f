// The onednn plugin's several CPU devices ("plugins.onednn.devices", set by
// `--plugin-option onednn.devices=N|numa`), seen through the C ABI: their
// number and names, each device's own memory statistics, a launch on
// onednn:k leaving the calling thread with onednn:k's thread count and on
// its CPUs, two host threads multiplying concurrently on two devices to the
// single device's bits, and the values refused.
//
// Each test loads the plugin with its own configuration and lets it go at
// the end (the kit shuts a plugin down when its last user goes), so this is
// a binary of its own: tandem_onednn_tests keeps one load for its life.
// Expectations come from this process's affinity mask, never from an
// assumed machine; launches run on threads made here, so the main thread,
// which initialises the plugin, stays where it was.
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tandem/conformance/run_op.hpp"

namespace tc = tandem::conformance;

namespace {

using Config = std::vector<std::pair<std::string, std::string>>;

// The CPUs the calling thread may run on; empty where the mask is wider
// than cpu_set_t (over 1024 CPUs).
std::vector<int> thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// The plugin loaded with `config`, one kit per device (its device and a
// stream open); empty, with `why`, when it does not load.
struct Devices {
  std::vector<std::unique_ptr<tc::PluginUnderTest>> kits;
  std::string why;
  uint32_t count = 0;
};

Devices load(const Config& config) {
  Devices d;
  tc::OpenOptions options;
  options.config = config;
  for (uint32_t k = 0; d.why.empty() && (k == 0 || k < d.count); ++k) {
    tc::Outcome outcome;
    auto kit = tc::PluginUnderTest::load(TANDEM_ONEDNN_PLUGIN_PATH, outcome, options);
    if (!kit) {
      d.why = outcome.message;
      break;
    }
    if (k == 0 && kit->api().device_count(&d.count) != TDM_OK) d.why = tc::last_plugin_error();
    if (d.why.empty()) outcome = kit->open_device(k);
    if (!outcome.ok()) d.why = outcome.message;
    d.kits.push_back(std::move(kit));
  }
  if (!d.why.empty()) d.kits.clear();
  return d;
}

// The CPUs of device k when `cpus` are cut into n devices (as the
// plugin's README promises: contiguous, sizes differing by one at most,
// the larger first).
std::vector<int> group(const std::vector<int>& cpus, size_t n, size_t k) {
  const size_t base = cpus.size() / n, larger = cpus.size() % n;
  const size_t begin = k * base + std::min(k, larger);
  return {cpus.begin() + long(begin), cpus.begin() + long(begin + base + (k < larger ? 1 : 0))};
}

// A matmul whose every partial sum is exact in f32 (quarters, 256 deep):
// its bits are the product's on any thread count and any summation order.
const std::vector<int64_t> kA{96, 256}, kB{256, 160}, kC{96, 160};
tc::HostTensor quarters(const std::vector<int64_t>& dims, int seed) {
  std::vector<double> v(size_t(dims[0] * dims[1]));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int((i * 7 + size_t(seed)) % 9) - 4) / 4;
  return tc::HostTensor::from_values(TDM_F32, dims, v);
}

// What a thread saw: the product, and the calling thread's OpenMP thread
// count and CPUs after the launch.
struct Seen {
  tc::RunResult run;
  int max_threads = 0;
  std::vector<int> cpus;
};

Seen matmul_on(tc::PluginUnderTest& kit) {
  Seen s;
  s.run = tc::run_op(kit, "matmul", {}, {quarters(kA, 1), quarters(kB, 2)}, {{TDM_F32, kC}});
  s.max_threads = omp_get_max_threads();
  s.cpus = thread_cpus();
  return s;
}

}  // namespace

TEST(OnednnDevices, OneUnboundDeviceByDefault) {
  Devices d = load({});
  ASSERT_EQ(d.count, 1u) << d.why;
  EXPECT_EQ(d.kits[0]->device_name(), "onednn:0");
  Seen seen, before;
  std::thread t([&] {
    before.max_threads = omp_get_max_threads();
    before.cpus = thread_cpus();
    seen = matmul_on(*d.kits[0]);
  });
  t.join();
  ASSERT_TRUE(seen.run.outcome.ok()) << seen.run.outcome.message;
  EXPECT_EQ(seen.cpus, before.cpus);  // no binding
  EXPECT_EQ(seen.max_threads, before.max_threads);
  tdm_device* none = nullptr;
  EXPECT_NE(d.kits[0]->api().device_open(1, &none), TDM_OK);
  EXPECT_NE(tc::last_plugin_error().find("the onednn backend has 1 device"), std::string::npos)
      << tc::last_plugin_error();
}

TEST(OnednnDevices, TwoDevicesRunConcurrentlyOnTheirOwnCpus) {
  const std::vector<int> cpus = thread_cpus();
  if (cpus.size() < 2)
    GTEST_SKIP() << "this process may run on " << cpus.size()
                 << " CPU(s); two devices need one each (the plugin refuses devices=2 here)";
  Seen single;
  {
    Devices one = load({{"plugins.onednn.devices", "1"}});
    ASSERT_EQ(one.count, 1u) << one.why;
    std::thread t([&] { single = matmul_on(*one.kits[0]); });
    t.join();
    ASSERT_TRUE(single.run.outcome.ok()) << single.run.outcome.message;
  }
  Devices d = load({{"plugins.onednn.devices", "2"}});
  ASSERT_EQ(d.count, 2u) << d.why;
  EXPECT_EQ(d.kits[0]->device_name(), "onednn:0");
  EXPECT_EQ(d.kits[1]->device_name(), "onednn:1");
  Seen seen[2];
  std::thread t0([&] { seen[0] = matmul_on(*d.kits[0]); });
  std::thread t1([&] { seen[1] = matmul_on(*d.kits[1]); });
  t0.join();
  t1.join();
  for (size_t k = 0; k < 2; ++k) {
    SCOPED_TRACE("onednn:" + std::to_string(k));
    ASSERT_TRUE(seen[k].run.outcome.ok()) << seen[k].run.outcome.message;
    const std::vector<int> mine = group(cpus, 2, k);
    EXPECT_EQ(seen[k].cpus, mine);
    EXPECT_EQ(seen[k].max_threads, int(mine.size()));
    EXPECT_EQ(seen[k].run.outputs[0].to_f64(), single.run.outputs[0].to_f64());
  }
  tdm_device* none = nullptr;
  EXPECT_NE(d.kits[0]->api().device_open(2, &none), TDM_OK);
  EXPECT_NE(tc::last_plugin_error().find("the onednn backend has 2 devices"), std::string::npos)
      << tc::last_plugin_error();
}

TEST(OnednnDevices, ThreadsAreTheTotalSharedAmongDevices) {
  const std::vector<int> cpus = thread_cpus();
  if (cpus.size() < 2)
    GTEST_SKIP() << "this process may run on " << cpus.size() << " CPU(s); the test needs 2";
  Devices d = load({{"plugins.onednn.devices", "2"}, {"threads", "3"}});
  ASSERT_EQ(d.count, 2u) << d.why;
  Seen seen;
  std::thread t([&] { seen = matmul_on(*d.kits[1]); });
  t.join();
  ASSERT_TRUE(seen.run.outcome.ok()) << seen.run.outcome.message;
  EXPECT_EQ(seen.max_threads, 1);  // max(1, 3 / 2)
  EXPECT_EQ(seen.cpus, group(cpus, 2, 1));
}

// The workers of the launching thread's OpenMP team run on the device's
// CPUs too, also those the thread made before it drove the device (libgomp
// keeps a host thread's workers from team to team): a team on that thread
// after the launch is all on onednn:1's CPUs.
TEST(OnednnDevices, TheTeamOfALaunchingThreadRunsOnTheDevicesCpus) {
  const std::vector<int> cpus = thread_cpus();
  if (cpus.size() < 2)
    GTEST_SKIP() << "this process may run on " << cpus.size() << " CPU(s); the test needs 2";
  Devices d = load({{"plugins.onednn.devices", "2"}, {"threads", "4"}});  // 2 threads each
  ASSERT_EQ(d.count, 2u) << d.why;
  Seen seen;
  std::vector<std::vector<int>> team(2);
  std::thread t([&] {
    omp_set_num_threads(2);
#pragma omp parallel num_threads(2)
    (void)omp_get_thread_num();  // workers made unbound
    seen = matmul_on(*d.kits[1]);
#pragma omp parallel num_threads(2)
    team[size_t(omp_get_thread_num())] = thread_cpus();
  });
  t.join();
  ASSERT_TRUE(seen.run.outcome.ok()) << seen.run.outcome.message;
  EXPECT_EQ(seen.max_threads, 2);
  EXPECT_EQ(team[0], group(cpus, 2, 1));
  EXPECT_EQ(team[1], group(cpus, 2, 1));
}

// A thread that serves a second device (the trainer's thread prepares every
// device's kernels; unpipelined, it runs them all) goes back to the CPUs it
// had, its team with it, and keeps each device's thread count: it must not
// carry one device's cores into what it does or starts next.
TEST(OnednnDevices, AThreadServingTwoDevicesGoesBackToItsOwnCpus) {
  const std::vector<int> cpus = thread_cpus();
  if (cpus.size() < 2)
    GTEST_SKIP() << "this process may run on " << cpus.size() << " CPU(s); the test needs 2";
  Devices d = load({{"plugins.onednn.devices", "2"}, {"threads", "4"}});  // 2 threads each
  ASSERT_EQ(d.count, 2u) << d.why;
  Seen first, second, again;
  std::vector<std::vector<int>> team(2);
  std::thread t([&] {
    first = matmul_on(*d.kits[0]);
    second = matmul_on(*d.kits[1]);
    again = matmul_on(*d.kits[0]);
#pragma omp parallel num_threads(2)
    team[size_t(omp_get_thread_num())] = thread_cpus();
  });
  t.join();
  for (const Seen* s : {&first, &second, &again}) ASSERT_TRUE(s->run.outcome.ok()) << s->run.outcome.message;
  EXPECT_EQ(first.cpus, group(cpus, 2, 0));  // one device so far: on its cores
  EXPECT_EQ(second.cpus, cpus);
  EXPECT_EQ(again.cpus, cpus);
  EXPECT_EQ(second.max_threads, 2);
  EXPECT_EQ(team[0], cpus);
  EXPECT_EQ(team[1], cpus);
  EXPECT_EQ(second.run.outputs[0].to_f64(), first.run.outputs[0].to_f64());
}

TEST(OnednnDevices, EachDeviceCountsItsOwnMemory) {
  if (thread_cpus().size() < 2) GTEST_SKIP() << "this process may run on fewer than 2 CPUs";
  Devices d = load({{"plugins.onednn.devices", "2"}});
  ASSERT_EQ(d.count, 2u) << d.why;
  const tdm_backend_api& api = d.kits[0]->api();
  auto allocated = [&](size_t k) {
    tdm_memory_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(api.memory_stats(d.kits[k]->device(), &s), TDM_OK);
    return s.allocated;
  };
  const uint64_t before0 = allocated(0), before1 = allocated(1);
  void* p = nullptr;
  ASSERT_EQ(api.mem_alloc(d.kits[1]->device(), 4096, &p), TDM_OK);
  EXPECT_EQ(allocated(0), before0);
  EXPECT_EQ(allocated(1), before1 + 4096);
  api.mem_free(d.kits[1]->device(), p);
}

TEST(OnednnDevices, NumaGivesADeviceForEachNodeWithCpus) {
  const std::vector<int> cpus = thread_cpus();
  Devices d = load({{"plugins.onednn.devices", "numa"}});
  ASSERT_GE(d.count, 1u) << d.why;
  EXPECT_LE(d.count, std::max<size_t>(cpus.size(), 1));
  for (uint32_t k = 0; k < d.count; ++k) EXPECT_EQ(d.kits[k]->device_name(), "onednn:" + std::to_string(k));
}

TEST(OnednnDevices, ValuesItCannotFollowFailInitNamingThem) {
  std::vector<std::string> values{"many", "0", "-2"};
  if (const size_t cpus = thread_cpus().size(); cpus > 0) values.push_back(std::to_string(cpus + 1));
  for (const std::string& value : values) {
    Devices d = load({{"plugins.onednn.devices", value}});
    EXPECT_EQ(d.count, 0u) << value;
    EXPECT_NE(d.why.find("--plugin-option onednn.devices=" + value), std::string::npos) << d.why;
    EXPECT_NE(d.why.find("numa"), std::string::npos) << d.why;
  }
  Devices after = load({});  // a failed init leaves nothing behind
  EXPECT_EQ(after.count, 1u) << after.why;
}
