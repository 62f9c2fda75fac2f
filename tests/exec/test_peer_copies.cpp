// Copies between two devices of one backend (exec/copy_engine.hpp,
// PeerToPeer; ABI 1.7 peer_access and copy_peer), without a GPU: a fake
// backend of two devices that are not host-addressable logs every call.
// Its streams are synchronous (a copy happens when it is enqueued). Where the
// backend copies between its devices, one copy_peer on the source's copy
// stream, ordered after the source's compute stream, and the destination's
// compute stream waiting on the source's event; where it cannot (it says
// no, lacks the functions, speaks ABI 1.6, or the devices are of two
// backends) the staged route through host memory.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "exec/copy_engine.hpp"
#include "plugin/loaded_plugin.hpp"

struct tdm_device {
  int index;
};
struct tdm_stream {
  std::string name;
};
struct tdm_event {
  std::string name;
};

namespace tandem::test {
namespace {

using host::exec::CopyEngine;
using host::exec::CopyRoute;

// The one log of a test, and the fake backend's answer to peer_access. The
// engine's worker and observer threads call in too.
struct Fake {
  std::mutex mutex;
  std::vector<std::string> calls;
  int events = 0;
  int32_t peer_answer = 1;
  void add(std::string call) {
    std::lock_guard<std::mutex> lock(mutex);
    calls.push_back(std::move(call));
  }
};
Fake* g_fake = nullptr;
tdm_device g_devices[2] = {{0}, {1}};

std::string dev(const tdm_device* d) {
  return std::to_string(d->index);
}

tdm_status device_open(uint32_t index, tdm_device** out) {
  if (index > 1) return TDM_INVALID_ARGUMENT;
  *out = &g_devices[index];
  return TDM_OK;
}
void device_close(tdm_device*) {}
// Two devices of their own memory, as GPUs (DeviceHandle asks at open).
tdm_status device_info(tdm_device*, tdm_device_info* info) {
  info->kind = TDM_DEVICE_GPU;
  info->total_memory = info->free_memory = 1u << 30;
  info->host_addressable = 0;
  return TDM_OK;
}
tdm_status stream_create(tdm_device* d, tdm_stream** out) {
  *out = new tdm_stream{"copy" + dev(d)};
  return TDM_OK;
}
void stream_destroy(tdm_stream* s) {
  delete s;
}
tdm_status stream_synchronize(tdm_stream*) {
  return TDM_OK;
}
tdm_status event_create(tdm_device* d, tdm_event** out) {
  std::lock_guard<std::mutex> lock(g_fake->mutex);
  *out = new tdm_event{"d" + dev(d) + ".e" + std::to_string(g_fake->events++)};
  return TDM_OK;
}
void event_destroy(tdm_event* e) {
  delete e;
}
tdm_status event_record(tdm_event* e, tdm_stream* s) {
  g_fake->add("record " + e->name + " " + s->name);
  return TDM_OK;
}
tdm_status stream_wait_event(tdm_stream* s, tdm_event* e) {
  g_fake->add("wait " + s->name + " " + e->name);
  return TDM_OK;
}
tdm_status event_synchronize(tdm_event*) {
  return TDM_OK;
}
tdm_status copy_d2h(tdm_stream* s, void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  g_fake->add("copy_d2h " + s->name);
  return TDM_OK;
}
tdm_status copy_h2d(tdm_stream* s, void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  g_fake->add("copy_h2d " + s->name);
  return TDM_OK;
}
tdm_status peer_access(tdm_device* from, tdm_device* to, int32_t* out) {
  g_fake->add("peer_access " + dev(from) + " " + dev(to));
  *out = g_fake->peer_answer;
  return TDM_OK;
}
tdm_status copy_peer(tdm_stream* s, tdm_device* to, void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  g_fake->add("copy_peer " + s->name + " to " + dev(to));
  return TDM_OK;
}

tdm_backend_api fake_api(bool with_peer_functions) {
  tdm_backend_api api{};
  api.struct_size = sizeof api;
  api.device_open = device_open;
  api.device_close = device_close;
  api.device_info = device_info;
  api.stream_create = stream_create;
  api.stream_destroy = stream_destroy;
  api.stream_synchronize = stream_synchronize;
  api.event_create = event_create;
  api.event_destroy = event_destroy;
  api.event_record = event_record;
  api.stream_wait_event = stream_wait_event;
  api.event_synchronize = event_synchronize;
  api.copy_d2h = copy_d2h;
  api.copy_h2d = copy_h2d;
  if (with_peer_functions) {
    api.peer_access = peer_access;
    api.copy_peer = copy_peer;
  }
  return api;
}

class PeerCopies : public ::testing::Test {
 protected:
  void SetUp() override { g_fake = &fake_; }
  void TearDown() override { g_fake = nullptr; }

  host::LoadedPlugin plugin(const tdm_backend_api* api, uint32_t abi_minor = 7) {
    host::LoadedPlugin p;
    p.name = "fakegpu";
    p.abi_major = 1;
    p.abi_minor = p.abi_minor_effective = abi_minor;
    p.backend = api;
    return p;
  }
  // Copies src (on `from` device 0) to dst (on `to` device 1), the
  // destination waiting on its stream; the engine's route.
  CopyRoute copy(const host::LoadedPlugin& from, const host::LoadedPlugin& to) {
    auto d0 = host::DeviceHandle::open(from, 0);
    auto d1 = host::DeviceHandle::open(to, 1);
    EXPECT_TRUE(d0 && d1);
    if (!d0 || !d1) return CopyRoute::HostMemcpy;
    auto engine = CopyEngine::create({{&*d0, &compute0_}, {&*d1, &compute1_}}, {{0, 1, sizeof src_, "x"}});
    EXPECT_TRUE(engine) << engine.error().message;
    if (!engine) return CopyRoute::HostMemcpy;
    fake_.add("-- issue");
    EXPECT_TRUE((*engine)->issue(0, dst_, src_));
    EXPECT_TRUE((*engine)->wait_in_destination(0));
    EXPECT_TRUE((*engine)->finish());
    EXPECT_EQ(std::memcmp(dst_, src_, sizeof src_), 0) << "the bytes did not arrive";
    return (*engine)->route(0);
  }
  std::vector<std::string> calls_after(const std::string& first) {
    auto it = std::find(fake_.calls.begin(), fake_.calls.end(), first);
    return {it == fake_.calls.end() ? it : it + 1, fake_.calls.end()};
  }
  bool called(const std::string& prefix) {
    for (const std::string& c : fake_.calls)
      if (c.rfind(prefix, 0) == 0) return true;
    return false;
  }

  Fake fake_;
  tdm_stream compute0_{"compute0"}, compute1_{"compute1"};
  float src_[5] = {1.5f, -2, 3, 4.25f, 5}, dst_[5] = {};
};

TEST_F(PeerCopies, OneCopyOnTheSourcesStreamThatTheDestinationWaitsFor) {
  const tdm_backend_api api = fake_api(true);
  const host::LoadedPlugin p = plugin(&api);
  EXPECT_EQ(copy(p, p), CopyRoute::PeerToPeer);
  EXPECT_TRUE(called("peer_access 0 1"));
  // Events d0.* belong to the source device: "ready" on its compute stream,
  // the copy stream waiting for it, the copy, "done" after it; the
  // destination's compute stream waits for "done" without the host.
  const std::vector<std::string> expected = {"record d0.e0 compute0", "wait copy0 d0.e0",
                                             "copy_peer copy0 to 1", "record d0.e1 copy0",
                                             "wait compute1 d0.e1"};
  EXPECT_EQ(calls_after("-- issue"), expected);
}

TEST_F(PeerCopies, ThroughHostMemoryWhenTheBackendSaysNo) {
  fake_.peer_answer = 0;
  const tdm_backend_api api = fake_api(true);
  const host::LoadedPlugin p = plugin(&api);
  EXPECT_EQ(copy(p, p), CopyRoute::DeviceToDevice);
  EXPECT_TRUE(called("peer_access 0 1"));
  EXPECT_FALSE(called("copy_peer"));
  EXPECT_TRUE(called("copy_d2h copy0"));
  EXPECT_TRUE(called("copy_h2d copy1"));
}

TEST_F(PeerCopies, ThroughHostMemoryWhenTheBackendHasNoPeerFunctions) {
  const tdm_backend_api api = fake_api(false);
  const host::LoadedPlugin p = plugin(&api);
  EXPECT_EQ(copy(p, p), CopyRoute::DeviceToDevice);
  EXPECT_TRUE(called("copy_d2h copy0"));
}

// A 1.6 plugin's table may hold anything past mem_footprint: never called.
TEST_F(PeerCopies, NeverAskedOfAPluginThatSpeaksAbi16) {
  const tdm_backend_api api = fake_api(true);
  const host::LoadedPlugin p = plugin(&api, 6);
  EXPECT_EQ(copy(p, p), CopyRoute::DeviceToDevice);
  EXPECT_FALSE(called("peer_access"));
  EXPECT_FALSE(called("copy_peer"));
}

// Devices of two backends share no memory space a backend knows of.
TEST_F(PeerCopies, NeverBetweenTwoBackends) {
  const tdm_backend_api api = fake_api(true);
  const host::LoadedPlugin a = plugin(&api), b = plugin(&api);
  EXPECT_EQ(copy(a, b), CopyRoute::DeviceToDevice);
  EXPECT_FALSE(called("peer_access"));
}

}  // namespace
}  // namespace tandem::test
