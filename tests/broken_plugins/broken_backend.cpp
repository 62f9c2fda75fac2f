// A small CPU backend that fills the C table by hand, as a third-party
// author might, built once correct and once per way of breaking the
// contract (BROKEN, one of the names below). The same-verdict test gives
// each to the `tandem` host and to `tandem-conformance` and expects both to
// refuse it, or both to catch it, with the same reason.
//
// Ops: relu and relu_grad in f32 (enough to host a pinned relu layer in
// training: sdk/ABI.md section G), copy (a whole tensor). Everything else
// is declined with a reason.
//
//   good         correct
//   null_launch  kernel_launch is NULL
//   struct_zero  the descriptor's struct_size is 0
//   abi_major    reports ABI 2.0
//   overrun      relu and relu_grad write 4 floats past the end of their output
//   unwritten    relu leaves its output as it found it
//   throws       kernel_launch lets a C++ exception escape
//   entry_throws the entry point lets a C++ exception escape
//   init_throws  init lets a C++ exception escape
//   writes_input relu also zeroes its input
//   shadow       correct, but calls itself "reference"
//   no_bn_eval   also accepts batch_norm_train, batch_norm_grad and
//                sgd_update, not batch_norm_inference: a pinned batch_norm
//                layer trains on it but cannot be evaluated there, which
//                `tandem plan` must say. For plan only: those launches
//                compute nothing (plan times them, never reads a result)
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tandem/plugin.h"

#ifndef BROKEN
#error "BROKEN must name the variant"
#endif
#define BROKEN_IS(name) (std::strcmp(BROKEN, name) == 0)

struct tdm_device {
  int unused;
};
struct tdm_stream {
  int unused;
};
struct tdm_event {
  int unused;
};
struct tdm_kernel {
  enum { Relu, ReluGrad, Copy, Unimplemented } op;
  size_t count;  // elements (bytes for Copy)
};

namespace {

const tdm_host_api* g_host = nullptr;
tdm_device g_device{};

tdm_status refuse(tdm_status status, const std::string& message) {
  g_host->set_error(g_host->ctx, status, "%s", message.c_str());
  return status;
}

size_t numel(const tdm_tensor_desc& d) {
  size_t n = 1;
  for (uint32_t i = 0; i < d.rank; ++i) n *= size_t(d.dims[i]);
  return n;
}

extern "C" {

tdm_status device_count(uint32_t* count) {
  *count = 1;
  return TDM_OK;
}
tdm_status device_open(uint32_t index, tdm_device** out) {
  if (index != 0) return refuse(TDM_INVALID_ARGUMENT, "no device " + std::to_string(index));
  *out = &g_device;
  return TDM_OK;
}
void device_close(tdm_device*) {}
tdm_status device_info(tdm_device*, tdm_device_info* out) {
  tdm_device_info full{};
  full.struct_size = sizeof full;
  full.name = "broken test CPU";
  full.kind = TDM_DEVICE_CPU;
  full.total_memory = uint64_t(1) << 30;
  full.free_memory = uint64_t(1) << 29;
  full.host_addressable = 1;
  const size_t size = out->struct_size < sizeof full ? out->struct_size : sizeof full;
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(uint32_t),
              reinterpret_cast<char*>(&full) + sizeof(uint32_t), size - sizeof(uint32_t));
  return TDM_OK;
}
tdm_status mem_alloc(tdm_device*, size_t bytes, void** out) {
  *out = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  return *out != nullptr ? TDM_OK : refuse(TDM_OUT_OF_MEMORY, "out of memory");
}
void mem_free(tdm_device*, void* p) {
  std::free(p);
}
tdm_status stream_create(tdm_device*, tdm_stream** out) {
  *out = new tdm_stream{};
  return TDM_OK;
}
void stream_destroy(tdm_stream* s) {
  delete s;
}
tdm_status stream_synchronize(tdm_stream*) {
  return TDM_OK;
}
tdm_status event_create(tdm_device*, tdm_event** out) {
  *out = new tdm_event{};
  return TDM_OK;
}
void event_destroy(tdm_event* e) {
  delete e;
}
tdm_status event_record(tdm_event*, tdm_stream*) {
  return TDM_OK;
}
tdm_status stream_wait_event(tdm_stream*, tdm_event*) {
  return TDM_OK;
}
tdm_status event_synchronize(tdm_event*) {
  return TDM_OK;
}
tdm_status copy_any(tdm_stream*, void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memmove(dst, src, bytes);
  return TDM_OK;
}

tdm_status kernel_prepare(tdm_device*, const tdm_op_desc* op, tdm_kernel** out, size_t* workspace) {
  *workspace = 0;
  const std::string name = op->op;
  tdm_kernel k{};
  if (name == "copy" && op->n_inputs == 1 && op->n_outputs == 1) {
    k.op = tdm_kernel::Copy;
    k.count = numel(op->inputs[0]) * (op->inputs[0].dtype == TDM_F32 ? 4 : 0);
    if (k.count == 0 && numel(op->inputs[0]) != 0) return refuse(TDM_UNSUPPORTED, "broken: copy of f32 only");
  } else if ((name == "relu" && op->n_inputs == 1) || (name == "relu_grad" && op->n_inputs == 2)) {
    for (size_t i = 0; i < op->n_inputs; ++i)
      if (op->inputs[i].dtype != TDM_F32) return refuse(TDM_UNSUPPORTED, "broken: f32 only");
    k.op = name == "relu" ? tdm_kernel::Relu : tdm_kernel::ReluGrad;
    k.count = numel(op->outputs[0]);
  } else if (BROKEN_IS("no_bn_eval") &&
             (name == "batch_norm_train" || name == "batch_norm_grad" || name == "sgd_update")) {
    k.op = tdm_kernel::Unimplemented;
  } else {
    return refuse(TDM_UNSUPPORTED, "broken: no " + name);
  }
  *out = new tdm_kernel(k);
  return TDM_OK;
}

tdm_status kernel_launch(tdm_kernel* k, tdm_stream*, void* const* in, void* const* out, void*) {
  if (BROKEN_IS("throws")) throw std::runtime_error("broken: the kernel threw");
  if (k->op == tdm_kernel::Copy) return copy_any(nullptr, out[0], in[0], k->count);
  if (k->op == tdm_kernel::Unimplemented) return TDM_OK;
  auto* y = static_cast<float*>(out[0]);
  const size_t end = k->count + (BROKEN_IS("overrun") ? 4 : 0);
  if (k->op == tdm_kernel::Relu) {
    auto* x = static_cast<float*>(in[0]);
    if (!BROKEN_IS("unwritten"))
      for (size_t i = 0; i < end; ++i) y[i] = i < k->count && x[i] > 0 ? x[i] : 0.0f;
    if (BROKEN_IS("writes_input")) std::memset(x, 0, k->count * sizeof(float));
  } else {
    const auto* dy = static_cast<const float*>(in[0]);
    const auto* x = static_cast<const float*>(in[1]);
    for (size_t i = 0; i < end; ++i) y[i] = i < k->count && x[i] > 0 ? dy[i] : 0.0f;
  }
  return TDM_OK;
}

void kernel_release(tdm_kernel* k) {
  delete k;
}

tdm_status init_throws(const tdm_config*) {
  throw std::runtime_error("broken: init threw");
}

}  // extern "C"

tdm_backend_api g_api{};
tdm_plugin g_plugin{};

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major, uint32_t) {
  g_host = host;
  if (BROKEN_IS("entry_throws")) throw std::runtime_error("broken: the entry point threw");
  if (major != TDM_ABI_MAJOR) {
    host->set_error(host->ctx, TDM_VERSION_MISMATCH, "built for ABI %d, the host speaks %u", TDM_ABI_MAJOR,
                    major);
    return nullptr;
  }
  g_api.struct_size = sizeof g_api;
  g_api.device_count = device_count;
  g_api.device_open = device_open;
  g_api.device_close = device_close;
  g_api.device_info = device_info;
  g_api.mem_alloc = mem_alloc;
  g_api.mem_free = mem_free;
  g_api.stream_create = stream_create;
  g_api.stream_destroy = stream_destroy;
  g_api.stream_synchronize = stream_synchronize;
  g_api.event_create = event_create;
  g_api.event_destroy = event_destroy;
  g_api.event_record = event_record;
  g_api.stream_wait_event = stream_wait_event;
  g_api.event_synchronize = event_synchronize;
  g_api.copy_h2d = copy_any;
  g_api.copy_d2h = copy_any;
  g_api.copy_d2d = copy_any;
  g_api.kernel_prepare = kernel_prepare;
  g_api.kernel_launch = BROKEN_IS("null_launch") ? nullptr : kernel_launch;
  g_api.kernel_release = kernel_release;

  g_plugin.struct_size = BROKEN_IS("struct_zero") ? 0 : sizeof g_plugin;
  g_plugin.abi_major = BROKEN_IS("abi_major") ? 2 : TDM_ABI_MAJOR;
  g_plugin.abi_minor = BROKEN_IS("abi_major") ? 0 : TDM_ABI_MINOR;
  g_plugin.name = BROKEN_IS("shadow") ? "reference" : "broken";
  g_plugin.kind = TDM_PLUGIN_BACKEND;
  g_plugin.version = "0.0.1";
  g_plugin.sdk_version = TDM_SDK_VERSION;
  g_plugin.description = "a backend broken on purpose (" BROKEN ")";
  g_plugin.backend = &g_api;
  if (BROKEN_IS("init_throws")) g_plugin.init = init_throws;
  return &g_plugin;
}
