// A minimal host for the CUDA plugin tests: the plugin loaded by the
// conformance kit's loader (PluginUnderTest), its device opened on demand,
// and single ops run by the kit's runner (run_op), with host tensors of raw
// bytes in and out.
#ifndef TANDEM_TESTS_CUDA_GPU_HARNESS_HPP
#define TANDEM_TESTS_CUDA_GPU_HARNESS_HPP

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tandem/conformance/run_op.hpp"

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
  const tdm_plugin& descriptor() const { return kit_->descriptor(); }
  const tdm_backend_api& api() const { return kit_->api(); }
  static std::string last_error();
  // "" when device 0 is usable, else the plugin's reason (for GTEST_SKIP).
  std::string device_unavailable_reason();
  tdm_device* device() const { return kit_->device(); }
  tdm_stream* stream() const { return kit_->stream(); }

  // Runs `op`; outputs come back with their bytes filled. Returns the status
  // of the first failing step (prepare's TDM_UNSUPPORTED included).
  tdm_status run(const std::string& op, const std::vector<Attr>& attrs, const std::vector<Tensor>& inputs,
                 std::vector<Tensor>& outputs, size_t* workspace = nullptr);
  // How the last run's kernel described itself (kernel_describe).
  const std::string& implementation() const { return implementation_; }

 private:
  std::unique_ptr<tandem::conformance::PluginUnderTest> kit_;
  bool opened_ = false;
  std::string unavailable_;
  std::string implementation_;
};

}  // namespace cudatest

#endif
