// The oneDNN plugin loaded the way a minimal host would, by the conformance
// kit's loader (PluginUnderTest): a host table whose config_get answers
// "threads" = 1, device 0 and one stream. Shared by the oneDNN unit tests
// (one load per test binary); single ops run through the kit's runner
// (run_op), the calls it does not make (kernel_layouts, a kernel launched
// many times) through the C table.
#pragma once

#include <omp.h>

#include <cstdint>
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

// omp threads for the life of a scope (the kernels take the team size they
// were prepared with, so set it before running an op).
struct ThreadCount {
  explicit ThreadCount(int n) : saved(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ThreadCount() { omp_set_num_threads(saved); }
  int saved;
};

// Deterministic values in [-1, 1) that are not round numbers.
inline tc::HostTensor values(const std::vector<int64_t>& dims, int seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  uint32_t x = 2463534242u + uint32_t(seed) * 7919u;
  for (double& e : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    e = double(x % 20011) / 10005.5 - 1.0;
  }
  return tc::HostTensor::from_values(TDM_F32, dims, v);
}

// The instruction sets oneDNN may use, as the device reports them
// ("avx2 fma", "avx512_core fma vnni bf16 ..."); empty when it does not say.
inline std::string device_features() {
  Fixture& f = loaded();
  tdm_device_info info{};
  info.struct_size = sizeof info;
  if (f.api->device_info(f.device, &info) != TDM_OK || info.features == nullptr) return {};
  return info.features;
}

// Whether oneDNN's effective ISA is AVX2 + FMA (the own GEMM's CPUs; an
// AVX-512 CPU says avx512_core).
inline bool effective_isa_is_avx2() {
  const std::string features = device_features();
  return features.rfind("avx2", 0) == 0 && features.find(" fma") != std::string::npos;
}

}  // namespace onednn_test
