// A minimal host for the CUDA plugin tests: dlopens the plugin, passes a
// host-services table that records the last error, and runs single ops
// (host tensors in, host tensors out) on device 0.
#ifndef TANDEM_TESTS_CUDA_GPU_HARNESS_HPP
#define TANDEM_TESTS_CUDA_GPU_HARNESS_HPP

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tandem/tandem.h"

namespace cudatest {

struct Tensor {
  tdm_dtype dtype = TDM_F32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;

  static Tensor f32(std::vector<int64_t> dims, const std::vector<float>& v);
  static Tensor s32(std::vector<int64_t> dims, const std::vector<int32_t>& v);
  static Tensor empty(tdm_dtype dtype, std::vector<int64_t> dims);  // shape only (outputs)
  static Tensor absent();                                           // optional slot left out
  int64_t numel() const;
  std::vector<float> floats() const;  // f32 only
};

struct Attr {
  std::string name;
  tdm_attr_type type;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> ints;
  static Attr integer(std::string n, int64_t v) { return {std::move(n), TDM_ATTR_INT, v, 0.0, "", {}}; }
  static Attr real(std::string n, double v) { return {std::move(n), TDM_ATTR_FLOAT, 0, v, "", {}}; }
  static Attr text(std::string n, std::string v) {
    return {std::move(n), TDM_ATTR_STRING, 0, 0.0, std::move(v), {}};
  }
  static Attr list(std::string n, std::vector<int64_t> v) {
    return {std::move(n), TDM_ATTR_INTS, 0, 0.0, "", std::move(v)};
  }
};

class Plugin {
 public:
  // Loads once per process. Returns nullptr and sets `why` on failure.
  static Plugin* load(std::string& why);
  const tdm_plugin& descriptor() const { return *plugin_; }
  const tdm_backend_api& api() const { return *plugin_->backend; }
  static std::string last_error();
  // "" when device 0 is usable, else the plugin's reason (for GTEST_SKIP).
  std::string device_unavailable_reason();
  tdm_device* device() const { return device_; }
  tdm_stream* stream() const { return stream_; }

  // Runs `op`; outputs come back with their bytes filled. Returns the status
  // of the first failing step (prepare's TDM_UNSUPPORTED included).
  tdm_status run(const std::string& op, const std::vector<Attr>& attrs, const std::vector<Tensor>& inputs,
                 std::vector<Tensor>& outputs, size_t* workspace = nullptr);

 private:
  const tdm_plugin* plugin_ = nullptr;
  tdm_device* device_ = nullptr;
  tdm_stream* stream_ = nullptr;
  bool opened_ = false;
  std::string unavailable_;
};

}  // namespace cudatest

#endif
