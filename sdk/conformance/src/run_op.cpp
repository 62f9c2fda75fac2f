// run_op: one op, end to end through the backend table.
#include "tandem/conformance/run_op.hpp"

#include <cstdio>

namespace tandem::conformance {

Attrs& Attrs::integer(const std::string& n, int64_t v) {
  Item& it = items_.emplace_back();
  it.name = n;
  it.type = TDM_ATTR_INT;
  it.i = v;
  return *this;
}
Attrs& Attrs::number(const std::string& n, double v) {
  Item& it = items_.emplace_back();
  it.name = n;
  it.type = TDM_ATTR_FLOAT;
  it.f = v;
  return *this;
}
Attrs& Attrs::string(const std::string& n, const std::string& v) {
  Item& it = items_.emplace_back();
  it.name = n;
  it.type = TDM_ATTR_STRING;
  it.s = v;
  return *this;
}
Attrs& Attrs::ints(const std::string& n, std::vector<int64_t> v) {
  Item& it = items_.emplace_back();
  it.name = n;
  it.type = TDM_ATTR_INTS;
  it.is = std::move(v);
  return *this;
}
Attrs& Attrs::floats(const std::string& n, std::vector<double> v) {
  Item& it = items_.emplace_back();
  it.name = n;
  it.type = TDM_ATTR_FLOATS;
  it.fs = std::move(v);
  return *this;
}

std::vector<tdm_attr> Attrs::view() const {
  std::vector<tdm_attr> out;
  for (const Item& it : items_) {
    tdm_attr a{};
    a.struct_size = sizeof a;
    a.name = it.name.c_str();
    a.type = it.type;
    a.i = it.i;
    a.f = it.f;
    a.s = it.type == TDM_ATTR_STRING ? it.s.c_str() : nullptr;
    a.ints = it.type == TDM_ATTR_INTS ? it.is.data() : nullptr;
    a.floats = it.type == TDM_ATTR_FLOATS ? it.fs.data() : nullptr;
    a.count = it.type == TDM_ATTR_INTS ? it.is.size() : it.type == TDM_ATTR_FLOATS ? it.fs.size() : 0;
    out.push_back(a);
  }
  return out;
}

std::string Attrs::str() const {
  std::string s;
  for (const Item& it : items_) {
    s += (s.empty() ? "" : " ") + it.name + "=";
    char buf[32];
    switch (it.type) {
      case TDM_ATTR_INT:
        s += std::to_string(it.i);
        break;
      case TDM_ATTR_FLOAT:
        std::snprintf(buf, sizeof buf, "%g", it.f), s += buf;
        break;
      case TDM_ATTR_STRING:
        s += it.s;
        break;
      case TDM_ATTR_INTS:
        for (size_t k = 0; k < it.is.size(); ++k) {
          if (k) s += ',';
          s += std::to_string(it.is[k]);
        }
        if (it.is.empty()) s += "[]";
        break;
      case TDM_ATTR_FLOATS:
        for (size_t k = 0; k < it.fs.size(); ++k)
          std::snprintf(buf, sizeof buf, k ? ",%g" : "%g", it.fs[k]), s += buf;
        break;
      default:
        break;
    }
  }
  return s;
}

namespace {

tdm_tensor_desc describe(const TensorShape& shape) {
  tdm_tensor_desc d{};
  d.struct_size = sizeof d;
  d.dtype = shape.dtype;
  d.rank = static_cast<uint32_t>(shape.dims.size());
  d.dims = shape.dims.empty() ? nullptr : shape.dims.data();
  d.strides = nullptr;
  return d;
}

std::string why(const std::string& what, tdm_status status) {
  const std::string& msg = last_plugin_error();
  return what + " failed (status " + std::to_string(status) + ")" + (msg.empty() ? "" : ": " + msg);
}

// Device allocations of one run, freed on every path.
struct DeviceBuffers {
  PluginUnderTest& plugin;
  std::vector<void*> owned;
  ~DeviceBuffers() {
    plugin.api().stream_synchronize(plugin.stream());  // no copy or kernel may still use them
    for (void* p : owned)
      if (p != nullptr) plugin.api().mem_free(plugin.device(), p);
  }
  tdm_status allocate(size_t bytes, void** out) {
    // Zero-sized tensors still get a distinct, valid pointer.
    tdm_status s = plugin.api().mem_alloc(plugin.device(), bytes == 0 ? 64 : bytes, out);
    if (s == TDM_OK) owned.push_back(*out);
    return s;
  }
};

struct KernelHolder {
  const tdm_backend_api& api;
  tdm_kernel* kernel = nullptr;
  ~KernelHolder() {
    if (kernel != nullptr) api.kernel_release(kernel);
  }
};

}  // namespace

RunResult run_op(PluginUnderTest& plugin, const std::string& op, const Attrs& attrs,
                 const std::vector<HostTensor>& inputs, const std::vector<TensorShape>& outputs,
                 const RunOptions& options) {
  RunResult result;
  const tdm_backend_api& api = plugin.api();
  tdm_stream* stream = plugin.stream();

  std::vector<TensorShape> in_shapes;
  std::vector<tdm_tensor_desc> in_desc, out_desc;
  for (const HostTensor& t : inputs)
    in_shapes.push_back(t.present() ? t.shape() : TensorShape(TDM_DTYPE_INVALID, {}));
  for (const TensorShape& s : in_shapes) in_desc.push_back(describe(s));
  for (const TensorShape& s : outputs) out_desc.push_back(describe(s));
  std::vector<tdm_attr> attr_view = attrs.view();

  tdm_op_desc desc{};
  desc.struct_size = sizeof desc;
  desc.op = op.c_str();
  desc.op_version = 1;
  desc.attrs = attr_view.empty() ? nullptr : attr_view.data();
  desc.n_attrs = attr_view.size();
  desc.inputs = in_desc.empty() ? nullptr : in_desc.data();
  desc.n_inputs = in_desc.size();
  desc.outputs = out_desc.empty() ? nullptr : out_desc.data();
  desc.n_outputs = out_desc.size();
  desc.node_name = "conformance";

  KernelHolder kernel{api};
  size_t workspace_bytes = 0;
  clear_plugin_error();
  tdm_status status = api.kernel_prepare(plugin.device(), &desc, &kernel.kernel, &workspace_bytes);
  if (status == TDM_UNSUPPORTED) {
    result.outcome = {Status::unsupported,
                      last_plugin_error().empty() ? "no reason given" : last_plugin_error()};
    return result;
  }
  if (status != TDM_OK || kernel.kernel == nullptr) {
    result.outcome = Outcome::fail(why("kernel_prepare", status));
    return result;
  }
  if (TDM_STRUCT_HAS(&api, tdm_backend_api, kernel_describe) && api.kernel_describe != nullptr) {
    const char* d = api.kernel_describe(kernel.kernel);
    if (d != nullptr) result.implementation = d;
  }

  // Declared before the buffers: host memory a pending copy reads must
  // outlive the synchronize in ~DeviceBuffers.
  std::vector<std::vector<uint8_t>> poison(outputs.size());
  DeviceBuffers buffers{plugin, {}};
  std::vector<void*> in_ptr(inputs.size(), nullptr), out_ptr(outputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].present()) continue;
    if ((status = buffers.allocate(inputs[i].size_bytes(), &in_ptr[i])) != TDM_OK ||
        (status = api.copy_h2d(stream, in_ptr[i], inputs[i].data(), inputs[i].size_bytes())) != TDM_OK) {
      result.outcome = Outcome::fail(why("input " + std::to_string(i) + " allocation/copy", status));
      return result;
    }
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (outputs[o].dtype == TDM_DTYPE_INVALID) continue;
    bool aliased = false;
    for (auto [out, in] : options.in_place)
      if (out == o && in < inputs.size()) out_ptr[o] = in_ptr[in], aliased = true;
    if (aliased) continue;
    if ((status = buffers.allocate(outputs[o].bytes(), &out_ptr[o])) != TDM_OK) {
      result.outcome = Outcome::fail(why("output " + std::to_string(o) + " allocation", status));
      return result;
    }
    if (options.poison_outputs && outputs[o].bytes() > 0) {
      poison[o].assign(outputs[o].bytes(), 0xFF);
      if ((status = api.copy_h2d(stream, out_ptr[o], poison[o].data(), poison[o].size())) != TDM_OK) {
        result.outcome = Outcome::fail(why("poisoning output " + std::to_string(o), status));
        return result;
      }
    }
  }
  void* workspace = nullptr;
  if (workspace_bytes > 0 && (status = buffers.allocate(workspace_bytes, &workspace)) != TDM_OK) {
    result.outcome =
        Outcome::fail(why("workspace allocation (" + std::to_string(workspace_bytes) + " bytes)", status));
    return result;
  }
  clear_plugin_error();
  status = api.kernel_launch(kernel.kernel, stream, in_ptr.data(), out_ptr.data(), workspace);
  if (status != TDM_OK) {
    api.stream_synchronize(stream);
    result.outcome = Outcome::fail(why("kernel_launch", status));
    return result;
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    result.outputs.emplace_back(outputs[o].dtype == TDM_DTYPE_INVALID ? HostTensor()
                                                                      : HostTensor(outputs[o]));
    HostTensor& t = result.outputs.back();
    if (t.present() && t.size_bytes() > 0 &&
        (status = api.copy_d2h(stream, t.data(), out_ptr[o], t.size_bytes())) != TDM_OK) {
      api.stream_synchronize(stream);
      result.outcome = Outcome::fail(why("copy of output " + std::to_string(o) + " to the host", status));
      return result;
    }
  }
  if ((status = api.stream_synchronize(stream)) != TDM_OK) {
    result.outcome = Outcome::fail(why("stream_synchronize after the launch", status));
    result.outputs.clear();
  }
  return result;
}

}  // namespace tandem::conformance
