// sdk.cpp_helper: tandem.hpp compiles as C++20 and turns a class-based
// backend into a C table whose struct_size is the full tdm_backend_api.
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <memory>
#include <string>

#include "tandem/byte_size.hpp"
#include "tandem/tandem.hpp"

namespace {

struct Recorded {
  tdm_status code = TDM_OK;
  std::string message;
};
Recorded& recorded() {
  static Recorded r;
  return r;
}

void set_error(void*, tdm_status code, const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  recorded() = {code, buffer};
}

tdm_host_api make_host() {
  tdm_host_api h{};
  h.struct_size = sizeof h;
  h.abi_major = TDM_ABI_MAJOR;
  h.abi_minor = TDM_ABI_MINOR;
  h.set_error = set_error;
  return h;
}

class NoKernelsDevice : public tandem::Device {
 public:
  tdm_device_info info() override {
    tdm_device_info i{};
    i.struct_size = sizeof i;
    i.name = "test cpu";
    i.kind = TDM_DEVICE_CPU;
    i.host_addressable = 1;
    return i;
  }
  void* allocate(size_t bytes) override { return ::operator new(bytes); }
  void deallocate(void* p) noexcept override { ::operator delete(p); }
  std::unique_ptr<tandem::Kernel> prepare(const tandem::OpView& op, size_t&) override {
    throw tandem::Unsupported("no kernels for " + op.op());
  }
};

class TestBackend : public tandem::Backend {
 public:
  uint32_t device_count() override { return 1; }
  tandem::Device& device(uint32_t) override { return device_; }

 private:
  NoKernelsDevice device_;
};

}  // namespace

TEST(CppHelper, BackendTableHasFullStructSize) {
  const tdm_backend_api* api = tandem::BackendAdapter<TestBackend>::table();
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->struct_size, sizeof(tdm_backend_api));
  EXPECT_NE(api->kernel_describe, nullptr);  // the last 1.1 entry is filled
}

TEST(CppHelper, EntryDescribesPluginAndRunsTable) {
  static const tdm_host_api host = make_host();
  const tdm_plugin* p = tandem::backend_entry<TestBackend>(&host, TDM_ABI_MAJOR, TDM_ABI_MINOR,
                                                           {"test", "0.0.1", "unit test backend", {}});
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->struct_size, sizeof(tdm_plugin));
  EXPECT_EQ(p->abi_major, static_cast<uint32_t>(TDM_ABI_MAJOR));
  EXPECT_EQ(p->kind, TDM_PLUGIN_BACKEND);
  EXPECT_STREQ(p->sdk_version, TDM_SDK_VERSION);
  ASSERT_NE(p->backend, nullptr);
  EXPECT_EQ(p->backend->struct_size, sizeof(tdm_backend_api));
  ASSERT_EQ(p->init(nullptr), TDM_OK);

  uint32_t count = 0;
  ASSERT_EQ(p->backend->device_count(&count), TDM_OK);
  EXPECT_EQ(count, 1u);
  tdm_device* device = nullptr;
  ASSERT_EQ(p->backend->device_open(0, &device), TDM_OK);

  // An older host that only knows the first fields gets only those.
  tdm_device_info info{};
  info.struct_size = TDM_STRUCT_SIZE(tdm_device_info, kind);
  info.total_memory = 42;
  ASSERT_EQ(p->backend->device_info(device, &info), TDM_OK);
  EXPECT_STREQ(info.name, "test cpu");
  EXPECT_EQ(info.total_memory, 42u);  // past struct_size: untouched

  // Unsupported is a status plus a message, never an exception.
  tdm_op_desc op{};
  op.struct_size = sizeof op;
  op.op = "matmul";
  tdm_kernel* kernel = nullptr;
  size_t workspace = 0;
  EXPECT_EQ(p->backend->kernel_prepare(device, &op, &kernel, &workspace), TDM_UNSUPPORTED);
  EXPECT_EQ(kernel, nullptr);
  EXPECT_EQ(recorded().code, TDM_UNSUPPORTED);
  EXPECT_NE(recorded().message.find("matmul"), std::string::npos);
  p->shutdown();
}

TEST(CppHelper, RefusesOtherAbiMajor) {
  static const tdm_host_api host = make_host();
  recorded() = {};
  const tdm_plugin* p =
      tandem::backend_entry<TestBackend>(&host, TDM_ABI_MAJOR + 1, 0, {"test", "0.0.1", "", {}});
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(recorded().code, TDM_VERSION_MISMATCH);
  EXPECT_NE(recorded().message.find("rebuild"), std::string::npos);
}

TEST(CppHelper, NamesOfDtypesAndReductions) {
  EXPECT_STREQ(tandem::dtype_name(TDM_BF16), "bf16");
  EXPECT_STREQ(tandem::dtype_name(tdm_dtype(99)), "invalid");
  EXPECT_STREQ(tandem::reduce_op_name(TDM_REDUCE_SUM), "SUM");
  EXPECT_STREQ(tandem::reduce_op_name(TDM_REDUCE_MAX), "MAX");
  EXPECT_STREQ(tandem::reduce_op_name(TDM_REDUCE_MIN), "MIN");
  EXPECT_STREQ(tandem::reduce_op_name(TDM_REDUCE_AVG), "AVG");
  EXPECT_STREQ(tandem::reduce_op_name(tdm_reduce_op(9)), "?");
}

TEST(ByteSize, ParsesTheUnitsPeopleWrite) {
  EXPECT_EQ(tandem::parse_byte_size("4096"), 4096u);
  EXPECT_EQ(tandem::parse_byte_size("512B"), 512u);
  EXPECT_EQ(tandem::parse_byte_size("1.5KiB"), 1536u);
  EXPECT_EQ(tandem::parse_byte_size("2 MiB"), 2u << 20);
  EXPECT_EQ(tandem::parse_byte_size("6GiB"), uint64_t(6) << 30);
  for (const char* bad : {"", "lots", "0", "-1MiB", "2MB", "2 MiB extra", "99999999999999999999", "1e30",
                          "17179869184GiB", "inf", "nan"})
    EXPECT_FALSE(tandem::parse_byte_size(bad).has_value()) << bad;
}
