// Devices of backend plugins, and the optional-function fallback for a
// plugin built against ABI 1.0.
#include <gtest/gtest.h>

#include <vector>

#include "device/device.hpp"
#include "plugin/optional_call.hpp"
#include "plugin/registry.hpp"
#include "test_support.hpp"

namespace tandem::test {
namespace {

using host::DeviceHandle;
using host::HostServices;
using host::PluginRegistry;
using host::Result;

// Runs "fill" with value 2.5 over 8 floats on device 0.
void expect_fill_kernel_works(const host::LoadedPlugin& plugin) {
  Result<DeviceHandle> device = DeviceHandle::open(plugin, 0);
  ASSERT_TRUE(device.ok()) << device.error().message;
  const tdm_backend_api& b = *plugin.backend;
  int64_t dims[1] = {8};
  tdm_tensor_desc out{};
  out.struct_size = sizeof out;
  out.dtype = TDM_F32;
  out.rank = 1;
  out.dims = dims;
  tdm_attr value{};
  value.struct_size = sizeof value;
  value.name = "value";
  value.type = TDM_ATTR_FLOAT;
  value.f = 2.5;
  tdm_op_desc op{};
  op.struct_size = sizeof op;  // the host's (1.1) size; a 1.0 plugin reads what it knows
  op.op = "fill";
  op.op_version = 1;
  op.attrs = &value;
  op.n_attrs = 1;
  op.outputs = &out;
  op.n_outputs = 1;
  op.node_name = "test.fill";
  tdm_kernel* kernel = nullptr;
  size_t workspace = 99;
  ASSERT_EQ(b.kernel_prepare(device->get(), &op, &kernel, &workspace), TDM_OK);
  EXPECT_EQ(workspace, 0u);
  void* buffer = nullptr;
  ASSERT_EQ(b.mem_alloc(device->get(), 8 * sizeof(float), &buffer), TDM_OK);
  tdm_stream* stream = nullptr;
  ASSERT_EQ(b.stream_create(device->get(), &stream), TDM_OK);
  void* outputs[1] = {buffer};
  ASSERT_EQ(b.kernel_launch(kernel, stream, nullptr, outputs, nullptr), TDM_OK);
  ASSERT_EQ(b.stream_synchronize(stream), TDM_OK);
  std::vector<float> host(8, 0.0f);
  ASSERT_EQ(b.copy_d2h(stream, host.data(), buffer, 8 * sizeof(float)), TDM_OK);
  ASSERT_EQ(b.stream_synchronize(stream), TDM_OK);
  for (float f : host) EXPECT_EQ(f, 2.5f);
  b.kernel_release(kernel);
  b.stream_destroy(stream);
  b.mem_free(device->get(), buffer);
}

TEST(Devices, GoodBackendDeviceAndStats) {
  Loaded l("good", "testgood");
  const host::LoadedPlugin* p = l.registry->find("testgood");
  ASSERT_NE(p, nullptr);
  std::vector<host::BackendDevices> all = host::enumerate_devices(*l.registry);
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(all[0].devices.size(), 1u);
  EXPECT_EQ(all[0].no_device_reason, "");
  const host::DeviceInfo& d = all[0].devices[0];
  EXPECT_EQ(d.id, "testgood:0");
  EXPECT_EQ(d.backend, "testgood");
  EXPECT_EQ(d.name, "testgood test CPU");
  EXPECT_EQ(d.kind, TDM_DEVICE_CPU);
  EXPECT_EQ(d.total_memory, uint64_t{1} << 30);
  EXPECT_EQ(d.free_memory, uint64_t{1} << 29);
  EXPECT_TRUE(d.host_addressable);

  expect_fill_kernel_works(*p);
  Result<DeviceHandle> device = DeviceHandle::open(*p, 0);
  ASSERT_TRUE(device.ok());
  std::optional<tdm_memory_stats> stats = device->memory_stats();
  ASSERT_TRUE(stats.has_value());  // a 1.1 plugin provides them
  EXPECT_GE(stats->allocations, 1u);
  EXPECT_FALSE(DeviceHandle::open(*p, 5).ok());
  // Its allocator takes 64 KiB pages (mem_footprint, ABI 1.6): plans count them.
  EXPECT_EQ(device->allocation_footprint(1), 65536u);
  EXPECT_EQ(device->allocation_footprint(65537), 131072u);
}

TEST(Devices, Abi10PluginKernelWorksAndStatsFallBack) {
  Loaded l("abi10", "testabi10");
  const host::LoadedPlugin* p = l.registry->find("testabi10");
  ASSERT_NE(p, nullptr) << l.registry->candidates().at(0).reason;
  expect_fill_kernel_works(*p);
  Result<DeviceHandle> device = DeviceHandle::open(*p, 0);
  ASSERT_TRUE(device.ok());
  // memory_stats is past the end of the 1.0 table: never read, never called.
  EXPECT_EQ(TANDEM_OPTIONAL_FN(*p, backend, tdm_backend_api, memory_stats, 1), nullptr);
  EXPECT_EQ(TANDEM_OPTIONAL_FN(*p, backend, tdm_backend_api, kernel_describe, 1), nullptr);
  // Nor kernel_layouts (ABI 1.3): the executor keeps every value plain for it.
  EXPECT_EQ(TANDEM_OPTIONAL_FN(*p, backend, tdm_backend_api, kernel_layouts, 3), nullptr);
  EXPECT_FALSE(device->memory_stats().has_value());
  // No mem_footprint (ABI 1.6): the host's 512-byte granule.
  EXPECT_EQ(TANDEM_OPTIONAL_FN(*p, backend, tdm_backend_api, mem_footprint, 6), nullptr);
  EXPECT_EQ(device->allocation_footprint(1), 512u);
  EXPECT_EQ(device->allocation_footprint(1000), 1024u);
  Result<host::DeviceInfo> info = device->info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->id, "testabi10:0");
  EXPECT_EQ(info->total_memory, uint64_t{1} << 30);
}

TEST(Devices, BackendWithoutDeviceGivesReason) {
  Loaded l("good", "testgood", {{"plugins.testgood.no_device", "1"}});
  std::vector<host::BackendDevices> all = host::enumerate_devices(*l.registry);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(all[0].devices.empty());
  EXPECT_EQ(all[0].no_device_reason, "driver not found");
}

TEST(OptionalCall, ChecksSizeMinorAndPointer) {
  tdm_backend_api table{};
  table.struct_size = sizeof table;
  host::LoadedPlugin p;
  p.backend = &table;
  p.abi_minor_effective = 1;
  EXPECT_EQ(TANDEM_OPTIONAL_FN(p, backend, tdm_backend_api, memory_stats, 1), nullptr);  // NULL pointer
  table.memory_stats = [](tdm_device*, tdm_memory_stats*) -> tdm_status { return TDM_OK; };
  EXPECT_NE(TANDEM_OPTIONAL_FN(p, backend, tdm_backend_api, memory_stats, 1), nullptr);
  p.abi_minor_effective = 0;  // negotiated down
  EXPECT_EQ(TANDEM_OPTIONAL_FN(p, backend, tdm_backend_api, memory_stats, 1), nullptr);
  p.abi_minor_effective = 1;
  table.struct_size = static_cast<uint32_t>(TDM_STRUCT_SIZE(tdm_backend_api, kernel_release));  // a 1.0 table
  EXPECT_EQ(TANDEM_OPTIONAL_FN(p, backend, tdm_backend_api, memory_stats, 1), nullptr);
}

}  // namespace
}  // namespace tandem::test
