// Tiny harness for the reference backend's own tests: the reference plugin
// opened by the conformance kit's loader (PluginUnderTest) and one op run by
// its runner (run_op), with the call shape these tests were written in:
// tensors as raw bytes, outputs filled in place.
#ifndef TANDEM_TESTS_REFERENCE_HARNESS_HPP
#define TANDEM_TESTS_REFERENCE_HARNESS_HPP

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tandem/conformance/run_op.hpp"

namespace ref_test {

// A host tensor: description plus bytes.
struct Tensor {
  tdm_dtype dtype = TDM_DTYPE_INVALID;  // INVALID = absent optional tensor
  std::vector<int64_t> dims;
  std::vector<unsigned char> bytes;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  template <class S>
  std::vector<S> as() const {
    std::vector<S> v(bytes.size() / sizeof(S));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(S));
    return v;
  }
};

template <class S>
Tensor make(tdm_dtype dtype, std::vector<int64_t> dims, const std::vector<S>& values) {
  Tensor t{dtype, std::move(dims), {}};
  t.bytes.resize(values.size() * sizeof(S));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}
inline Tensor f32(std::vector<int64_t> dims, const std::vector<float>& v) {
  return make(TDM_F32, std::move(dims), v);
}
inline Tensor f64(std::vector<int64_t> dims, const std::vector<double>& v) {
  return make(TDM_F64, std::move(dims), v);
}
inline Tensor s32(std::vector<int64_t> dims, const std::vector<int32_t>& v) {
  return make(TDM_S32, std::move(dims), v);
}
inline Tensor u8(std::vector<int64_t> dims, const std::vector<uint8_t>& v) {
  return make(TDM_U8, std::move(dims), v);
}
// Raw 16-bit patterns, for f16 and bf16.
inline Tensor bits16(tdm_dtype dtype, std::vector<int64_t> dims, const std::vector<uint16_t>& v) {
  return make(dtype, std::move(dims), v);
}
// An output slot: shape and dtype, zeroed bytes.
inline Tensor out(tdm_dtype dtype, std::vector<int64_t> dims) {
  Tensor t{dtype, std::move(dims), {}};
  size_t esize = dtype == TDM_F64 || dtype == TDM_S64    ? 8
                 : dtype == TDM_F32 || dtype == TDM_S32  ? 4
                 : dtype == TDM_F16 || dtype == TDM_BF16 ? 2
                                                         : 1;
  t.bytes.assign(size_t(t.numel()) * esize, 0);
  return t;
}
inline Tensor absent() {
  return Tensor{};
}

struct Attr {
  std::string name;
  tdm_attr_type type;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
};
inline Attr attr(std::string n, int64_t v) {
  return {std::move(n), TDM_ATTR_INT, v, 0, "", {}};
}
inline Attr attr(std::string n, int v) {
  return attr(std::move(n), int64_t(v));
}
inline Attr attr(std::string n, double v) {
  return {std::move(n), TDM_ATTR_FLOAT, 0, v, "", {}};
}
inline Attr attr(std::string n, const char* v) {
  return {std::move(n), TDM_ATTR_STRING, 0, 0, v, {}};
}
inline Attr attr(std::string n, std::vector<int64_t> v) {
  return {std::move(n), TDM_ATTR_INTS, 0, 0, "", std::move(v)};
}

enum class Stage { None, Prepare, Launch };
struct Result {
  tdm_status status = TDM_OK;
  Stage failed_at = Stage::None;
  std::string message;   // the plugin's own message
  std::string describe;  // kernel_describe on success
};

// The loaded plugin; one per test process.
class Reference {
 public:
  static Reference& get() {
    static Reference r;
    return r;
  }
  const tdm_backend_api& api() const { return plugin_->api(); }
  tdm_device* device() const { return plugin_->device(); }
  const tdm_plugin& plugin() const { return plugin_->descriptor(); }
  // The plugin's last message on this thread (set_error).
  static const std::string& last_error() { return tandem::conformance::last_plugin_error(); }

  // Prepares and launches `op`; outputs receive the results in place.
  // `alias` lists {output, input} pairs launched on one buffer (in-place).
  Result run(const std::string& op, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
             const std::vector<Attr>& attrs = {}, const char* node_name = nullptr,
             const std::vector<std::pair<size_t, size_t>>& alias = {}) {
    namespace tc = tandem::conformance;
    std::vector<tc::HostTensor> in;
    for (const Tensor& t : inputs) {
      if (t.dtype == TDM_DTYPE_INVALID) {
        in.emplace_back();
        continue;
      }
      tc::HostTensor h(t.dtype, t.dims);
      std::memcpy(h.data(), t.bytes.data(), std::min(h.size_bytes(), t.bytes.size()));
      in.push_back(std::move(h));
    }
    std::vector<tandem::TensorShape> out;
    for (const Tensor& t : outputs) out.emplace_back(t.dtype, t.dims);
    tc::RunOptions options;
    options.in_place = alias;
    options.node_name = node_name != nullptr ? node_name : "";
    const tc::RunResult r = tc::run_op(*plugin_, op, attributes(attrs), in, out, options);
    Result result{r.status, Stage::None, r.plugin_message, r.implementation};
    if (r.failed_at == tc::RunStep::prepare) result.failed_at = Stage::Prepare;
    if (r.failed_at == tc::RunStep::launch) result.failed_at = Stage::Launch;
    for (size_t j = 0; j < r.outputs.size(); ++j)
      if (r.outputs[j].present())
        outputs[j].bytes.assign(r.outputs[j].data(), r.outputs[j].data() + r.outputs[j].size_bytes());
    return result;
  }

 private:
  Reference() {
    tandem::conformance::Outcome outcome;
    plugin_ = tandem::conformance::PluginUnderTest::open(TANDEM_REFERENCE_PLUGIN, outcome);
    if (!plugin_) throw std::runtime_error("cannot open the reference plugin: " + outcome.message);
  }
  static tandem::conformance::Attrs attributes(const std::vector<Attr>& attrs) {
    tandem::conformance::Attrs a;
    for (const Attr& x : attrs) {
      if (x.type == TDM_ATTR_INT) a.integer(x.name, x.i);
      if (x.type == TDM_ATTR_FLOAT) a.number(x.name, x.f);
      if (x.type == TDM_ATTR_STRING) a.string(x.name, x.s);
      if (x.type == TDM_ATTR_INTS) a.ints(x.name, x.ints);
    }
    return a;
  }

  std::unique_ptr<tandem::conformance::PluginUnderTest> plugin_;
};

// Runs one op on the process's reference plugin.
inline Result run(const std::string& op, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                  const std::vector<Attr>& attrs = {}, const char* node_name = nullptr,
                  const std::vector<std::pair<size_t, size_t>>& alias = {}) {
  return Reference::get().run(op, inputs, outputs, attrs, node_name, alias);
}

}  // namespace ref_test

#endif  // TANDEM_TESTS_REFERENCE_HARNESS_HPP
