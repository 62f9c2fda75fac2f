// The oneDNN plugin loaded the way a minimal host would: dlopen, a host table
// whose config_get answers "threads" = 1, device 0 and one stream. Shared by
// the oneDNN unit tests (one load per test binary).
#pragma once

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tandem/tandem.h"

namespace onednn_test {

inline std::string g_error;

inline void host_log(void*, tdm_log_level, const char*) {}
inline void host_set_error(void*, tdm_status, const char* format, ...) {
  char buf[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  g_error = buf;
}
inline tdm_status host_config_get(void*, const char* key, char* buffer, size_t* size) {
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

inline Fixture& loaded() {
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

inline uint64_t primitives_in(const char* described) {
  const std::string s = described;
  const size_t at = s.find("primitives_created=");
  return at == std::string::npos ? ~uint64_t(0) : std::stoull(s.substr(at + 19));
}

inline tdm_tensor_desc desc(tdm_dtype dt, const std::vector<int64_t>& dims) {
  tdm_tensor_desc d{};
  d.struct_size = sizeof d;
  d.dtype = dt;
  d.rank = uint32_t(dims.size());
  d.dims = dims.empty() ? nullptr : dims.data();
  return d;
}

}  // namespace onednn_test
