// What the CUDA plugin's GPU tests share (test_plugin.cpp and
// test_plugin_reductions.cpp): the loaded plugin, test data, bf16 storage
// as the plugin rounds it, the bytes a rounded output must hold, and the
// fixture that reports SKIPPED with the plugin's reason without a GPU.
#ifndef TANDEM_TESTS_CUDA_PLUGIN_TEST_SUPPORT_HPP
#define TANDEM_TESTS_CUDA_PLUGIN_TEST_SUPPORT_HPP

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_harness.hpp"
#include "math/common.hpp"
#include "tandem/half.hpp"

namespace cudatest {

namespace mm = tandem::cuda::math;

inline Plugin& plugin() {
  std::string why;
  Plugin* p = Plugin::load(why);
  if (p == nullptr) throw std::runtime_error(why);
  return *p;
}

inline std::vector<float> ramp(int64_t n, float scale = 0.1f, float shift = -1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = std::sin(float(i) * 1.3f) * scale * 10 + shift * 0.1f;
  return v;
}

// bf16 storage of v, rounded as the plugin rounds.
inline Tensor bf16(std::vector<int64_t> dims, const std::vector<float>& v) {
  Tensor t{TDM_BF16, std::move(dims), std::vector<uint8_t>(v.size() * 2)};
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t b = tandem::f32_to_bf16(v[i]);
    std::memcpy(t.bytes.data() + 2 * i, &b, 2);
  }
  return t;
}

inline std::vector<mm::bf16_t> bf16_values(const Tensor& t) {
  std::vector<mm::bf16_t> v(t.bytes.size() / 2);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

// The bytes an output of `n` elements of T holds when its values are `v`
// (f32 sums rounded to T): what the GPU must have written, bit for bit.
template <class T>
inline std::vector<uint8_t> stored(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  for (size_t i = 0; i < v.size(); ++i) {
    const T x = mm::from_float<T>(v[i]);
    std::memcpy(b.data() + i * sizeof(T), &x, sizeof(T));
  }
  return b;
}

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    p_ = Plugin::load(why);
    ASSERT_NE(p_, nullptr) << why;
    const std::string reason = p_->device_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << "no usable GPU: " << reason;
  }
  Plugin* p_ = nullptr;
};

}  // namespace cudatest

#endif  // TANDEM_TESTS_CUDA_PLUGIN_TEST_SUPPORT_HPP
