// Tiny harness for the reference backend's own tests: loads the built
// plugin with dlopen, speaks its C ABI directly (no conformance kit, no
// host), and runs one op on host buffers (the device is host-addressable).
#ifndef TANDEM_TESTS_REFERENCE_HARNESS_HPP
#define TANDEM_TESTS_REFERENCE_HARNESS_HPP

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tandem/tandem.h"

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
  std::string message;
  std::string describe;  // kernel_describe on success
};

// The loaded plugin; one per test process.
class Reference {
 public:
  static Reference& get() {
    static Reference r;
    return r;
  }
  const tdm_backend_api& api() const { return *plugin_->backend; }
  tdm_device* device() const { return device_; }
  const tdm_plugin& plugin() const { return *plugin_; }
  static std::string& last_error() {
    static thread_local std::string message;
    return message;
  }

  // Prepares and launches `op`; outputs receive the results in place.
  // `alias` lists {output, input} pairs launched on one buffer (in-place):
  // the output then receives the aliased input's buffer after the launch.
  Result run(const std::string& op, std::vector<Tensor> inputs, std::vector<Tensor>& outputs,
             const std::vector<Attr>& attrs = {}, const char* node_name = nullptr,
             const std::vector<std::pair<size_t, size_t>>& alias = {}) {
    std::vector<tdm_tensor_desc> in_desc, out_desc;
    for (const Tensor& t : inputs) in_desc.push_back(desc(t));
    for (const Tensor& t : outputs) out_desc.push_back(desc(t));
    std::vector<tdm_attr> attr_desc;
    for (const Attr& a : attrs) {
      tdm_attr d{};
      d.struct_size = sizeof d;
      d.name = a.name.c_str();
      d.type = a.type;
      d.i = a.i;
      d.f = a.f;
      d.s = a.s.c_str();
      d.ints = a.ints.data();
      d.count = a.ints.size();
      attr_desc.push_back(d);
    }
    tdm_op_desc od{};
    od.struct_size = sizeof od;
    od.op = op.c_str();
    od.op_version = 1;
    od.attrs = attr_desc.data();
    od.n_attrs = attr_desc.size();
    od.inputs = in_desc.data();
    od.n_inputs = in_desc.size();
    od.outputs = out_desc.data();
    od.n_outputs = out_desc.size();
    od.node_name = node_name;

    Result r;
    last_error().clear();
    tdm_kernel* kernel = nullptr;
    size_t workspace = 0;
    r.status = api().kernel_prepare(device_, &od, &kernel, &workspace);
    if (r.status != TDM_OK) {
      r.failed_at = Stage::Prepare;
      r.message = last_error();
      return r;
    }
    r.describe = api().kernel_describe(kernel);
    std::vector<void*> in_ptr, out_ptr;
    for (Tensor& t : inputs) in_ptr.push_back(t.dtype == TDM_DTYPE_INVALID ? nullptr : (void*)t.bytes.data());
    for (Tensor& t : outputs)
      out_ptr.push_back(t.dtype == TDM_DTYPE_INVALID ? nullptr : (void*)t.bytes.data());
    for (auto [o, i] : alias) out_ptr.at(o) = in_ptr.at(i);
    std::vector<unsigned char> ws(workspace);
    tdm_stream* stream = nullptr;
    api().stream_create(device_, &stream);
    r.status = api().kernel_launch(kernel, stream, in_ptr.data(), out_ptr.data(), ws.data());
    api().stream_synchronize(stream);
    api().stream_destroy(stream);
    api().kernel_release(kernel);
    for (auto [o, i] : alias) outputs[o].bytes = inputs[i].bytes;
    if (r.status != TDM_OK) {
      r.failed_at = Stage::Launch;
      r.message = last_error();
    }
    return r;
  }

 private:
  Reference() {
    void* lib = dlopen(TANDEM_REFERENCE_PLUGIN, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) throw std::runtime_error(std::string("dlopen failed: ") + dlerror());
    auto entry = reinterpret_cast<tdm_plugin_entry_fn>(dlsym(lib, TDM_PLUGIN_ENTRY_SYMBOL));
    if (entry == nullptr) throw std::runtime_error("no tdm_plugin_entry in " TANDEM_REFERENCE_PLUGIN);
    host_.struct_size = sizeof host_;
    host_.abi_major = TDM_ABI_MAJOR;
    host_.abi_minor = TDM_ABI_MINOR;
    host_.set_error = &set_error;
    plugin_ = entry(&host_, TDM_ABI_MAJOR, TDM_ABI_MINOR);
    if (plugin_ == nullptr || plugin_->backend == nullptr)
      throw std::runtime_error("entry refused: " + last_error());
    if (plugin_->init != nullptr && plugin_->init(nullptr) != TDM_OK)
      throw std::runtime_error("init: " + last_error());
    if (plugin_->backend->device_open(0, &device_) != TDM_OK)
      throw std::runtime_error("open: " + last_error());
  }
  static void set_error(void*, tdm_status, const char* format, ...) {
    char buffer[2048];
    va_list args;
    va_start(args, format);
    std::vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    last_error() = buffer;
  }
  static tdm_tensor_desc desc(const Tensor& t) {
    tdm_tensor_desc d{};
    d.struct_size = sizeof d;
    d.dtype = t.dtype;
    d.rank = uint32_t(t.dims.size());
    d.dims = t.dims.empty() ? nullptr : t.dims.data();
    return d;
  }

  tdm_host_api host_{};
  const tdm_plugin* plugin_ = nullptr;
  tdm_device* device_ = nullptr;
};

// Runs one op on the process's reference plugin.
inline Result run(const std::string& op, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                  const std::vector<Attr>& attrs = {}, const char* node_name = nullptr,
                  const std::vector<std::pair<size_t, size_t>>& alias = {}) {
  return Reference::get().run(op, inputs, outputs, attrs, node_name, alias);
}

}  // namespace ref_test

#endif  // TANDEM_TESTS_REFERENCE_HARNESS_HPP
