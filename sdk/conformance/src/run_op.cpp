// run_op: one op, end to end through the backend table.
#include "tandem/conformance/run_op.hpp"

#include <cstdio>
#include <cstring>
#include <utility>

#include "guarded_buffers.hpp"

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
double Attrs::number_or(const std::string& n, double fallback) const {
  for (const Item& it : items_)
    if (it.name == n && (it.type == TDM_ATTR_INT || it.type == TDM_ATTR_FLOAT))
      return it.type == TDM_ATTR_INT ? double(it.i) : it.f;
  return fallback;
}
std::string Attrs::string_or(const std::string& n, const std::string& fallback) const {
  for (const Item& it : items_)
    if (it.name == n && it.type == TDM_ATTR_STRING) return it.s;
  return fallback;
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

// The tdm_op_desc of one run and every array it points into.
struct OpDesc {
  std::vector<TensorShape> input_shapes;
  std::vector<tdm_tensor_desc> inputs, outputs;
  std::vector<tdm_attr> attrs;
  tdm_op_desc desc{};

  OpDesc(const std::string& op, const Attrs& attr_list, const std::vector<HostTensor>& in,
         const std::vector<TensorShape>& out, const RunOptions& options)
      : attrs(attr_list.view()) {
    for (const HostTensor& t : in)
      input_shapes.push_back(t.present() ? t.shape() : TensorShape(TDM_DTYPE_INVALID, {}));
    for (const TensorShape& shape : input_shapes) inputs.push_back(describe(shape));
    for (const TensorShape& shape : out) outputs.push_back(describe(shape));
    desc.struct_size = sizeof desc;
    desc.op = op.c_str();
    desc.op_version = 1;
    desc.attrs = attrs.empty() ? nullptr : attrs.data();
    desc.n_attrs = attrs.size();
    desc.inputs = inputs.empty() ? nullptr : inputs.data();
    desc.n_inputs = inputs.size();
    desc.outputs = outputs.empty() ? nullptr : outputs.data();
    desc.n_outputs = outputs.size();
    desc.node_name = options.node_name.empty() ? nullptr : options.node_name.c_str();
    desc.layouts = options.layouts.empty() ? nullptr : options.layouts.data();
  }
};

struct KernelHolder {
  const tdm_backend_api& api;
  tdm_kernel* kernel = nullptr;
  ~KernelHolder() {
    if (kernel != nullptr) call_plugin("kernel_release", [&] { api.kernel_release(kernel); });
  }
};

// Records where and why the run stopped; returns false.
bool stop(RunResult& r, RunStep step, tdm_status status, Outcome outcome) {
  r.outcome = std::move(outcome);
  r.status = status;
  r.failed_at = step;
  r.plugin_message = last_plugin_error();
  r.outputs.clear();
  return false;
}

bool prepare(PluginUnderTest& plugin, const tdm_op_desc& desc, KernelHolder& kernel, RunResult& r) {
  const tdm_backend_api& api = plugin.api();
  clear_plugin_error();
  const tdm_status status = call_plugin("kernel_prepare", [&] {
    return api.kernel_prepare(plugin.device(), &desc, &kernel.kernel, &r.workspace_bytes);
  });
  if (status == TDM_UNSUPPORTED) {
    const std::string& reason = last_plugin_error();
    return stop(r, RunStep::prepare, status,
                {Status::unsupported, reason.empty() ? "no reason given" : reason});
  }
  if (status != TDM_OK || kernel.kernel == nullptr)
    return stop(r, RunStep::prepare, status == TDM_OK ? TDM_INTERNAL : status,
                Outcome::fail(why("kernel_prepare", status)));
  if (TDM_STRUCT_HAS(&api, tdm_backend_api, kernel_describe) && api.kernel_describe != nullptr) {
    const char* d = nullptr;
    call_plugin("kernel_describe", [&] { d = api.kernel_describe(kernel.kernel); });
    if (d != nullptr) r.implementation = d;
  }
  return true;
}

// Device copies of the inputs, in `in_ptr` (nullptr for an absent one).
bool stage_inputs(PluginUnderTest& plugin, GuardedBuffers& buffers, const std::vector<HostTensor>& inputs,
                  std::vector<void*>& in_ptr, RunResult& r) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].present()) continue;
    tdm_status status = buffers.allocate(inputs[i].size_bytes(), "input " + std::to_string(i), &in_ptr[i]);
    if (status == TDM_OK)
      status = call_plugin("copy_h2d", [&] {
        return plugin.api().copy_h2d(plugin.stream(), in_ptr[i], inputs[i].data(), inputs[i].size_bytes());
      });
    if (status != TDM_OK)
      return stop(r, RunStep::buffers, status,
                  Outcome::fail(why("input " + std::to_string(i) + " allocation/copy", status)));
  }
  return true;
}

// Output buffers (an in-place output gets its input's), poisoned; `poison`
// holds the host bytes until the copies are done.
bool stage_outputs(PluginUnderTest& plugin, GuardedBuffers& buffers, const std::vector<TensorShape>& outputs,
                   const RunOptions& options, const std::vector<void*>& in_ptr, std::vector<void*>& out_ptr,
                   std::vector<std::vector<uint8_t>>& poison, RunResult& r) {
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (outputs[o].dtype == TDM_DTYPE_INVALID) continue;
    bool aliased = false;
    for (auto [out, in] : options.in_place)
      if (out == o && in < in_ptr.size()) out_ptr[o] = in_ptr[in], aliased = true;
    if (aliased) continue;
    tdm_status status = buffers.allocate(outputs[o].bytes(), "output " + std::to_string(o), &out_ptr[o]);
    if (status != TDM_OK)
      return stop(r, RunStep::buffers, status,
                  Outcome::fail(why("output " + std::to_string(o) + " allocation", status)));
    if (!options.poison_outputs || outputs[o].bytes() == 0) continue;
    poison[o].assign(outputs[o].bytes(), 0xFF);
    status = call_plugin("copy_h2d", [&] {
      return plugin.api().copy_h2d(plugin.stream(), out_ptr[o], poison[o].data(), poison[o].size());
    });
    if (status != TDM_OK)
      return stop(r, RunStep::buffers, status,
                  Outcome::fail(why("poisoning output " + std::to_string(o), status)));
  }
  return true;
}

// Copies every present output back and waits for the stream.
bool read_back(PluginUnderTest& plugin, const std::vector<TensorShape>& outputs,
               const std::vector<void*>& out_ptr, RunResult& r) {
  const tdm_backend_api& api = plugin.api();
  auto synchronize = [&] {
    return call_plugin("stream_synchronize", [&] { return api.stream_synchronize(plugin.stream()); });
  };
  for (size_t o = 0; o < outputs.size(); ++o) {
    r.outputs.emplace_back(outputs[o].dtype == TDM_DTYPE_INVALID ? HostTensor() : HostTensor(outputs[o]));
    HostTensor& t = r.outputs.back();
    if (!t.present() || t.size_bytes() == 0) continue;
    const tdm_status status = call_plugin(
        "copy_d2h", [&] { return api.copy_d2h(plugin.stream(), t.data(), out_ptr[o], t.size_bytes()); });
    if (status != TDM_OK) {
      synchronize();
      return stop(r, RunStep::readback, status,
                  Outcome::fail(why("copy of output " + std::to_string(o) + " to the host", status)));
    }
  }
  const tdm_status status = synchronize();
  if (status != TDM_OK)
    return stop(r, RunStep::readback, status,
                Outcome::fail(why("stream_synchronize after the launch", status)));
  return true;
}

// The inputs a kernel must only read (sdk/ABI.md rule 31: all but those
// bound in place to an output) still hold what was copied in.
bool inputs_unchanged(PluginUnderTest& plugin, const std::vector<HostTensor>& inputs,
                      const std::vector<void*>& in_ptr, const RunOptions& options, RunResult& r) {
  const tdm_backend_api& api = plugin.api();
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool in_place = false;
    for (auto [out, in] : options.in_place) in_place = in_place || in == i;
    if (in_place || !inputs[i].present() || inputs[i].size_bytes() == 0) continue;
    HostTensor after(inputs[i].shape());
    tdm_status status = call_plugin("copy_d2h", [&] {
      return api.copy_d2h(plugin.stream(), after.data(), in_ptr[i], after.size_bytes());
    });
    if (status == TDM_OK)
      status = call_plugin("stream_synchronize", [&] { return api.stream_synchronize(plugin.stream()); });
    if (status != TDM_OK)
      return stop(r, RunStep::readback, status,
                  Outcome::fail(why("copy of input " + std::to_string(i) + " to the host", status)));
    if (std::memcmp(after.data(), inputs[i].data(), after.size_bytes()) != 0)
      return stop(r, RunStep::launch, TDM_OK,
                  Outcome::fail("the kernel wrote into input " + std::to_string(i) +
                                ", which it must only read (sdk/ABI.md rule 31: only the in-place pairs of "
                                "ops.md share an input's buffer)"));
  }
  return true;
}

}  // namespace

RunResult run_op(PluginUnderTest& plugin, const std::string& op, const Attrs& attrs,
                 const std::vector<HostTensor>& inputs, const std::vector<TensorShape>& outputs,
                 const RunOptions& options) {
  RunResult result;
  const OpDesc desc(op, attrs, inputs, outputs, options);
  KernelHolder kernel{plugin.api()};
  if (!prepare(plugin, desc.desc, kernel, result)) return result;

  // Declared before the buffers: host memory a pending copy reads must
  // outlive the synchronize in ~GuardedBuffers.
  std::vector<std::vector<uint8_t>> poison(outputs.size());
  GuardedBuffers buffers(plugin);
  std::vector<void*> in_ptr(inputs.size(), nullptr), out_ptr(outputs.size(), nullptr);
  if (!stage_inputs(plugin, buffers, inputs, in_ptr, result) ||
      !stage_outputs(plugin, buffers, outputs, options, in_ptr, out_ptr, poison, result))
    return result;
  void* workspace = nullptr;
  const size_t ws_bytes = result.workspace_bytes;
  tdm_status status = ws_bytes > 0 ? buffers.allocate(ws_bytes, "the workspace", &workspace) : TDM_OK;
  if (status != TDM_OK) {
    stop(result, RunStep::buffers, status,
         Outcome::fail(why("workspace allocation (" + std::to_string(ws_bytes) + " bytes)", status)));
    return result;
  }
  clear_plugin_error();
  status = call_plugin("kernel_launch", [&] {
    return plugin.api().kernel_launch(kernel.kernel, plugin.stream(), in_ptr.data(), out_ptr.data(),
                                      workspace);
  });
  if (status != TDM_OK) {
    stop(result, RunStep::launch, status, Outcome::fail(why("kernel_launch", status)));
    call_plugin("stream_synchronize", [&] { return plugin.api().stream_synchronize(plugin.stream()); });
    return result;
  }
  if (!read_back(plugin, outputs, out_ptr, result)) return result;
  if (std::string outside = buffers.check_guards(); !outside.empty()) {
    stop(result, RunStep::launch, TDM_OK, Outcome::fail(outside));
    return result;
  }
  inputs_unchanged(plugin, inputs, in_ptr, options, result);
  return result;
}

}  // namespace tandem::conformance
