// The oneDNN plugin loaded the way a minimal host would, by the conformance
// kit's loader (PluginUnderTest): a host table whose config_get answers
// "threads" = 1, device 0 and one stream. Shared by the oneDNN unit tests
// (one load per test binary); single ops run through the kit's runner
// (run_op), the calls it does not make (kernel_layouts, a kernel launched
// many times) through the C table.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tandem/conformance/run_op.hpp"

namespace onednn_test {

namespace tc = tandem::conformance;

struct Fixture {
  std::unique_ptr<tc::PluginUnderTest> kit;  // null when the plugin did not open
  const tdm_plugin* plugin = nullptr;
  tdm_device* device = nullptr;
  tdm_stream* stream = nullptr;
  const tdm_backend_api* api = nullptr;
  std::string failure;  // why it did not open
};

inline Fixture& loaded() {
  static Fixture f = [] {
    Fixture x;
    tc::Outcome outcome;
    x.kit = tc::PluginUnderTest::open(TANDEM_ONEDNN_PLUGIN_PATH, outcome, {{{"threads", "1"}}});
    if (!x.kit) {
      x.failure = outcome.message;
      return x;
    }
    x.plugin = &x.kit->descriptor();
    x.api = &x.kit->api();
    x.device = x.kit->device();
    x.stream = x.kit->stream();
    return x;
  }();
  return f;
}

// The plugin's last message on this thread, or why it did not open.
inline std::string last_error() {
  return loaded().kit ? tc::last_plugin_error() : loaded().failure;
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
