// hello — a minimal Tandem backend: one CPU device and five catalog ops
// (fill, copy, add, relu, relu_grad), f32 only, same shapes only: enough to
// host a pinned relu layer in training (pinned_layer.toml). Everything else
// is answered with TDM_UNSUPPORTED, which is a normal answer: the host
// places those ops on another backend (sdk/ops.md).
//
// Built with the header-only C++ helper: tandem/tandem.hpp turns our classes
// into the C table and catches every exception before it can cross the
// plugin boundary; tandem/backend_kit.hpp gives the prepare-time checks
// (Check), the op registry that refuses unknown ops, newer op versions,
// negative dimensions and, from the SDK's op catalog, wrong operand counts,
// attributes and shapes for us (KernelRegistry), and closure kernels. In a
// larger backend each factory lives in ops/<section>.cpp, the file named
// after the op's section of sdk/ops.md.
#include <tandem/backend_kit.hpp>
#include <tandem/tandem.hpp>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <unistd.h>

namespace {

using tandem::Check;
using tandem::OpView;

// Every tensor of the op f32 with the shape of its first output; anything
// else is a normal "not here" (TDM_UNSUPPORTED), not an error.
void require_f32_same_shape(const Check& c) {
  const tandem::TensorShape& y = c.out(0);
  auto check = [&](const tandem::TensorShape& t) {
    if (t.dtype != TDM_F32) c.unsupported("hello only does f32, got " + t.str());
    if (t.dims != y.dims) c.unsupported("hello does not broadcast (" + t.str() + " vs " + y.str() + ")");
  };
  for (const auto& t : c.op().inputs()) check(t);
  for (const auto& t : c.op().outputs()) check(t);
}

// fill: y[i] = value.
std::unique_ptr<tandem::Kernel> fill(const OpView& op, size_t&) {
  Check c(op, "hello");
  require_f32_same_shape(c);
  const int64_t n = c.out(0).numel();
  const float value = static_cast<float>(c.float_attr("value", 0.0));
  return tandem::make_fn_kernel("hello:fill_f32", [n, value](void* const*, void* const* outputs) {
    float* y = static_cast<float*>(outputs[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = value;
  });
}

// copy: y = x (a CPU device: device memory is host memory).
std::unique_ptr<tandem::Kernel> copy(const OpView& op, size_t&) {
  Check c(op, "hello");
  require_f32_same_shape(c);
  const size_t bytes = c.out(0).bytes();
  return tandem::make_fn_kernel("hello:copy", [bytes](void* const* inputs, void* const* outputs) {
    if (bytes != 0 && inputs[0] != outputs[0]) std::memmove(outputs[0], inputs[0], bytes);
  });
}

// add: y = a + b, elementwise (in-place on either input is safe).
std::unique_ptr<tandem::Kernel> add(const OpView& op, size_t&) {
  Check c(op, "hello");
  require_f32_same_shape(c);
  const int64_t n = c.out(0).numel();
  return tandem::make_fn_kernel("hello:add_f32", [n](void* const* inputs, void* const* outputs) {
    const float* a = static_cast<const float*>(inputs[0]);
    const float* b = static_cast<const float*>(inputs[1]);
    float* y = static_cast<float*>(outputs[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  });
}

// relu: y = max(x, 0); relu_grad: dx = dy where x > 0, else 0. A relu
// layer pinned here runs both: its forward, and its backward when a layer
// before it has parameters (sdk/ABI.md rule 36).
std::unique_ptr<tandem::Kernel> relu(const OpView& op, size_t&) {
  Check c(op, "hello");
  require_f32_same_shape(c);
  const int64_t n = c.out(0).numel();
  return tandem::make_fn_kernel("hello:relu_f32", [n](void* const* inputs, void* const* outputs) {
    const float* x = static_cast<const float*>(inputs[0]);
    float* y = static_cast<float*>(outputs[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
  });
}

std::unique_ptr<tandem::Kernel> relu_grad(const OpView& op, size_t&) {
  Check c(op, "hello");
  require_f32_same_shape(c);
  const int64_t n = c.out(0).numel();
  return tandem::make_fn_kernel("hello:relu_grad_f32", [n](void* const* inputs, void* const* outputs) {
    const float* dy = static_cast<const float*>(inputs[0]);
    const float* x = static_cast<const float*>(inputs[1]);
    float* dx = static_cast<float*>(outputs[0]);
    for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0 ? dy[i] : 0.0f;
  });
}

// Catalog name -> factory; built once, looked up by every prepare.
const tandem::KernelRegistry<>& registry() {
  static const tandem::KernelRegistry<> r = [] {
    tandem::KernelRegistry<> ops("hello");
    ops.add("fill", fill);
    ops.add("copy", copy);
    ops.add("add", add);
    ops.add("relu", relu);
    ops.add("relu_grad", relu_grad);
    return ops;
  }();
  return r;
}

class HelloDevice : public tandem::Device {
 public:
  tdm_device_info info() override {
    tdm_device_info i{};
    i.struct_size = sizeof i;
    i.name = "hello CPU";
    i.kind = TDM_DEVICE_CPU;
    i.host_addressable = 1;  // plain host memory: the default memcpy copies are right
    // The machine's RAM is this device's memory (the planner budgets with it).
    const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    i.total_memory = page * static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES));
    i.free_memory = page * static_cast<uint64_t>(sysconf(_SC_AVPHYS_PAGES));
    return i;
  }

  void* allocate(size_t bytes) override {
    // 64-byte alignment is part of the contract; aligned_alloc wants a multiple.
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (p == nullptr)
      throw tandem::Error(TDM_OUT_OF_MEMORY, "hello: cannot allocate " + std::to_string(bytes) + " bytes");
    return p;
  }
  void deallocate(void* pointer) noexcept override { std::free(pointer); }

  std::unique_ptr<tandem::Kernel> prepare(const tandem::OpView& op, size_t& workspace_bytes) override {
    return registry().prepare(op, workspace_bytes);  // an op hello lacks: TDM_UNSUPPORTED
  }
};

class HelloBackend : public tandem::Backend {
 public:
  uint32_t device_count() override { return 1; }
  tandem::Device& device(uint32_t index) override {
    if (index != 0)
      throw tandem::Error(TDM_INVALID_ARGUMENT, "hello has one device, not " + std::to_string(index + 1));
    return device_;
  }

 private:
  HelloDevice device_;
};

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t host_abi_major,
                                                         uint32_t host_abi_minor) {
  try {  // the descriptor's strings allocate; nothing may escape a C entry point
    return tandem::backend_entry<HelloBackend>(
        host, host_abi_major, host_abi_minor,
        {"hello", "0.1.0", "Example backend: fill, copy, add, relu, relu_grad on f32.", {}});
  } catch (...) {
    return nullptr;
  }
}
