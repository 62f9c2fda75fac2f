// A minimal host for the CUDA plugin tests (see gpu_harness.hpp).
#include "gpu_harness.hpp"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace cudatest {
namespace {

thread_local std::string g_error;

void host_log(void*, tdm_log_level, const char*) {}
void host_set_error(void*, tdm_status, const char* format, ...) {
  char buffer[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  g_error = buffer;
}
tdm_status host_config_get(void*, const char*, char*, size_t*) {
  return TDM_NOT_FOUND;
}

tdm_host_api make_host() {
  tdm_host_api h{};
  h.struct_size = sizeof h;
  h.abi_major = TDM_ABI_MAJOR;
  h.abi_minor = TDM_ABI_MINOR;
  h.log = host_log;
  h.set_error = host_set_error;
  h.config_get = host_config_get;
  return h;
}

}  // namespace

Tensor Tensor::f32(std::vector<int64_t> dims, const std::vector<float>& v) {
  Tensor t{TDM_F32, std::move(dims), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
Tensor Tensor::s32(std::vector<int64_t> dims, const std::vector<int32_t>& v) {
  Tensor t{TDM_S32, std::move(dims), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
Tensor Tensor::empty(tdm_dtype dtype, std::vector<int64_t> dims) {
  return Tensor{dtype, std::move(dims), {}};
}
Tensor Tensor::absent() {
  return Tensor{TDM_DTYPE_INVALID, {}, {}};
}
int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}
std::vector<float> Tensor::floats() const {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

std::string Plugin::last_error() {
  return g_error;
}

Plugin* Plugin::load(std::string& why) {
  static Plugin* instance = nullptr;
  static std::string failure;
  static bool tried = false;
  if (!tried) {
    tried = true;
    static const tdm_host_api host = make_host();
    // TANDEM_CUDA_PLUGIN overrides the build-tree path (a copied build).
    const char* env = std::getenv("TANDEM_CUDA_PLUGIN");
    const char* path = env != nullptr && *env != '\0' ? env : TANDEM_CUDA_PLUGIN_PATH;
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) {
      failure = std::string("dlopen failed: ") + dlerror();
    } else if (auto entry = reinterpret_cast<tdm_plugin_entry_fn>(dlsym(lib, TDM_PLUGIN_ENTRY_SYMBOL));
               !entry) {
      failure = "no tdm_plugin_entry";
    } else if (const tdm_plugin* p = entry(&host, TDM_ABI_MAJOR, TDM_ABI_MINOR); p == nullptr) {
      failure = "entry refused: " + g_error;
    } else if (p->init != nullptr && p->init(nullptr) != TDM_OK) {
      failure = "init failed: " + g_error;
    } else {
      instance = new Plugin();
      instance->plugin_ = p;
    }
  }
  why = failure;
  return instance;
}

std::string Plugin::device_unavailable_reason() {
  if (opened_) return unavailable_;
  opened_ = true;
  uint32_t count = 0;
  if (api().device_count(&count) != TDM_OK) return unavailable_ = "cuda plugin: " + g_error;
  if (count == 0) return unavailable_ = "cuda plugin: 0 devices";
  if (api().device_open(0, &device_) != TDM_OK) return unavailable_ = "device_open failed: " + g_error;
  if (api().stream_create(device_, &stream_) != TDM_OK)
    return unavailable_ = "stream_create failed: " + g_error;
  return unavailable_;
}

tdm_status Plugin::run(const std::string& op, const std::vector<Attr>& attrs,
                       const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                       size_t* workspace_out) {
  std::vector<tdm_attr> a;
  for (const Attr& x : attrs) {
    tdm_attr t{};
    t.struct_size = sizeof t;
    t.name = x.name.c_str();
    t.type = x.type;
    t.i = x.i;
    t.f = x.f;
    t.s = x.s.c_str();
    t.ints = x.ints.data();
    t.count = x.ints.size();
    a.push_back(t);
  }
  auto descs = [](const std::vector<Tensor>& ts) {
    std::vector<tdm_tensor_desc> d;
    for (const Tensor& t : ts) {
      tdm_tensor_desc x{};
      x.struct_size = sizeof x;
      x.dtype = t.dtype;
      x.rank = static_cast<uint32_t>(t.dims.size());
      x.dims = t.dims.empty() ? nullptr : t.dims.data();
      d.push_back(x);
    }
    return d;
  };
  const auto in_d = descs(inputs), out_d = descs(outputs);
  tdm_op_desc desc{};
  desc.struct_size = sizeof desc;
  desc.op = op.c_str();
  desc.op_version = 1;
  desc.attrs = a.data();
  desc.n_attrs = a.size();
  desc.inputs = in_d.data();
  desc.n_inputs = in_d.size();
  desc.outputs = out_d.data();
  desc.n_outputs = out_d.size();
  tdm_kernel* kernel = nullptr;
  size_t ws = 0;
  if (tdm_status s = api().kernel_prepare(device_, &desc, &kernel, &ws); s != TDM_OK) return s;
  if (workspace_out) *workspace_out = ws;
  auto bytes_of = [](const Tensor& t) {
    const size_t e = t.dtype == TDM_F16 || t.dtype == TDM_BF16 ? 2
                     : t.dtype == TDM_U8 || t.dtype == TDM_S8  ? 1
                                                               : 4;
    return static_cast<size_t>(t.numel()) * e;
  };
  std::vector<void*> din, dout;
  tdm_status status = TDM_OK;
  for (const Tensor& t : inputs) {
    void* p = nullptr;
    if (t.dtype != TDM_DTYPE_INVALID) {
      api().mem_alloc(device_, bytes_of(t), &p);
      api().copy_h2d(stream_, p, t.bytes.data(), bytes_of(t));
    }
    din.push_back(p);
  }
  for (Tensor& t : outputs) {
    void* p = nullptr;
    if (t.dtype != TDM_DTYPE_INVALID) api().mem_alloc(device_, bytes_of(t), &p);
    t.bytes.resize(bytes_of(t));
    dout.push_back(p);
  }
  void* wsp = nullptr;
  if (ws) api().mem_alloc(device_, ws, &wsp);
  status = api().kernel_launch(kernel, stream_, din.data(), dout.data(), wsp);
  for (size_t j = 0; j < outputs.size() && status == TDM_OK; ++j)
    if (dout[j]) api().copy_d2h(stream_, outputs[j].bytes.data(), dout[j], outputs[j].bytes.size());
  if (tdm_status s = api().stream_synchronize(stream_); status == TDM_OK) status = s;
  for (void* p : din) api().mem_free(device_, p);
  for (void* p : dout) api().mem_free(device_, p);
  if (wsp) api().mem_free(device_, wsp);
  api().kernel_release(kernel);
  return status;
}

}  // namespace cudatest
