// Unit tests of the oneDNN backend for what the conformance kit cannot see:
// metadata, primitive caching (launches create no primitive and allocate no
// device memory) and the "threads" configuration. A minimal host: dlopen the
// plugin, hand it a host table whose config_get answers "threads".
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tandem/tandem.h"

namespace {

std::string g_error;

void host_log(void*, tdm_log_level, const char*) {}
void host_set_error(void*, tdm_status, const char* format, ...) {
  char buf[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  g_error = buf;
}
tdm_status host_config_get(void*, const char* key, char* buffer, size_t* size) {
  if (std::string(key) != "threads") return TDM_NOT_FOUND;
  const char value[] = "1";
  if (*size < sizeof value) {
    *size = sizeof value;
    return TDM_INVALID_ARGUMENT;
  }
  std::memcpy(buffer, value, sizeof value);
  *size = sizeof value;
  return TDM_OK;
}

struct Fixture {
  const tdm_plugin* plugin = nullptr;
  tdm_device* device = nullptr;
  tdm_stream* stream = nullptr;
  const tdm_backend_api* api = nullptr;
};

Fixture& loaded() {
  static Fixture f = [] {
    Fixture x;
    static tdm_host_api host{};
    host.struct_size = sizeof host;
    host.abi_major = TDM_ABI_MAJOR;
    host.abi_minor = TDM_ABI_MINOR;
    host.log = host_log;
    host.set_error = host_set_error;
    host.config_get = host_config_get;
    void* lib = dlopen(TANDEM_ONEDNN_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) return x;
    auto entry = reinterpret_cast<tdm_plugin_entry_fn>(dlsym(lib, TDM_PLUGIN_ENTRY_SYMBOL));
    if (entry == nullptr) return x;
    x.plugin = entry(&host, TDM_ABI_MAJOR, TDM_ABI_MINOR);
    if (x.plugin == nullptr || x.plugin->init(nullptr) != TDM_OK) return x;
    x.api = x.plugin->backend;
    if (x.api->device_open(0, &x.device) != TDM_OK) return x;
    x.api->stream_create(x.device, &x.stream);
    return x;
  }();
  return f;
}

uint64_t primitives_in(const char* described) {
  const std::string s = described;
  const size_t at = s.find("primitives_created=");
  return at == std::string::npos ? ~uint64_t(0) : std::stoull(s.substr(at + 19));
}

tdm_tensor_desc desc(tdm_dtype dt, const std::vector<int64_t>& dims) {
  tdm_tensor_desc d{};
  d.struct_size = sizeof d;
  d.dtype = dt;
  d.rank = uint32_t(dims.size());
  d.dims = dims.empty() ? nullptr : dims.data();
  return d;
}

}  // namespace

TEST(OnednnPlugin, Metadata) {
  Fixture& f = loaded();
  ASSERT_NE(f.plugin, nullptr) << g_error;
  EXPECT_STREQ(f.plugin->name, "onednn");
  ASSERT_EQ(f.plugin->n_vendors, 1u);
  EXPECT_STREQ(f.plugin->vendors[0].name, "oneDNN");
  EXPECT_EQ(std::string(f.plugin->vendors[0].version).rfind("2.", 0), 0u);
  tdm_device_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(f.api->device_info(f.device, &info), TDM_OK);
  EXPECT_STREQ(info.name, "onednn:0");
  EXPECT_EQ(info.host_addressable, 1);
}

TEST(OnednnPlugin, ThreadsConfigApplied) {
  ASSERT_NE(loaded().plugin, nullptr) << g_error;
  EXPECT_EQ(omp_get_max_threads(), 1);  // the host said threads = 1
}

TEST(OnednnPlugin, LaunchesCreateNoPrimitiveAndAllocateNothing) {
  Fixture& f = loaded();
  ASSERT_NE(f.device, nullptr) << g_error;
  const std::vector<int64_t> xd{8, 32}, wd{16, 32}, bd{16}, yd{8, 16};
  tdm_tensor_desc in[3] = {desc(TDM_F32, xd), desc(TDM_F32, wd), desc(TDM_F32, bd)};
  tdm_tensor_desc out[1] = {desc(TDM_F32, yd)};
  tdm_attr act{};
  act.struct_size = sizeof act;
  act.name = "activation";
  act.type = TDM_ATTR_STRING;
  act.s = "relu";
  tdm_op_desc op{};
  op.struct_size = sizeof op;
  op.op = "linear";
  op.op_version = 1;
  op.attrs = &act;
  op.n_attrs = 1;
  op.inputs = in;
  op.n_inputs = 3;
  op.outputs = out;
  op.n_outputs = 1;
  tdm_kernel* k1 = nullptr;
  tdm_kernel* k2 = nullptr;
  size_t ws1 = 0, ws2 = 0;
  ASSERT_EQ(f.api->kernel_prepare(f.device, &op, &k1, &ws1), TDM_OK) << g_error;
  ASSERT_EQ(f.api->kernel_prepare(f.device, &op, &k2, &ws2), TDM_OK) << g_error;
  EXPECT_NE(std::string(f.api->kernel_describe(k1)).find("onednn:linear("), std::string::npos);

  std::vector<float> x(8 * 32, 0.5f), w(16 * 32, 0.25f), b(16, -1.f), y(8 * 16, 0.f);
  std::vector<char> ws(ws1 > ws2 ? ws1 : ws2);
  void* inputs[3] = {x.data(), w.data(), b.data()};
  void* outputs[1] = {y.data()};
  tdm_memory_stats before{};
  before.struct_size = sizeof before;
  ASSERT_EQ(f.api->memory_stats(f.device, &before), TDM_OK);
  const uint64_t created = primitives_in(f.api->kernel_describe(k1));
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(f.api->kernel_launch(k1, f.stream, inputs, outputs, ws.data()), TDM_OK) << g_error;
    ASSERT_EQ(f.api->kernel_launch(k2, f.stream, inputs, outputs, ws.data()), TDM_OK) << g_error;
  }
  EXPECT_EQ(primitives_in(f.api->kernel_describe(k1)), created);
  tdm_memory_stats after{};
  after.struct_size = sizeof after;
  ASSERT_EQ(f.api->memory_stats(f.device, &after), TDM_OK);
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_FLOAT_EQ(y[0], 32 * 0.5f * 0.25f - 1.f);  // relu(4 - 1)
  f.api->kernel_release(k1);
  f.api->kernel_release(k2);
}

TEST(OnednnPlugin, F16MatmulIsUnsupported) {
  Fixture& f = loaded();
  ASSERT_NE(f.device, nullptr) << g_error;
  const std::vector<int64_t> d{2, 2};
  tdm_tensor_desc in[2] = {desc(TDM_F16, d), desc(TDM_F16, d)};
  tdm_tensor_desc out[1] = {desc(TDM_F16, d)};
  tdm_op_desc op{};
  op.struct_size = sizeof op;
  op.op = "matmul";
  op.op_version = 1;
  op.inputs = in;
  op.n_inputs = 2;
  op.outputs = out;
  op.n_outputs = 1;
  tdm_kernel* k = nullptr;
  size_t ws = 0;
  EXPECT_EQ(f.api->kernel_prepare(f.device, &op, &k, &ws), TDM_UNSUPPORTED);
  EXPECT_NE(g_error.find("f16"), std::string::npos) << g_error;
}
