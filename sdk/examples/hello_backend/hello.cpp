// hello — a minimal Tandem backend: one CPU device and three catalog ops
// (fill, copy, add), f32 only, same shapes only. Everything else is answered
// with tandem::Unsupported, which is a normal answer: the host places those
// ops on another backend (sdk/ops.md).
//
// Built with the header-only C++ helper (tandem/tandem.hpp): we write
// classes, the helper produces the C table and catches every exception
// before it can cross the plugin boundary.
#include <tandem/tandem.hpp>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <unistd.h>

namespace {

// Checks that every tensor of the op is f32 with the shape of the first
// output; throws Unsupported (not an error) otherwise.
void require_f32_same_shape(const tandem::OpView& op) {
  const tandem::TensorShape& y = op.outputs().at(0);
  auto check = [&](const tandem::TensorShape& t) {
    if (t.dtype != TDM_F32) throw tandem::Unsupported(op.op() + ": hello only does f32, got " + t.str());
    if (t.dims != y.dims)
      throw tandem::Unsupported(op.op() + ": hello does not broadcast (" + t.str() + " vs " + y.str() + ")");
  };
  for (const auto& t : op.inputs()) check(t);
  for (const auto& t : op.outputs()) check(t);
}

// fill: y[i] = value.
class Fill : public tandem::Kernel {
 public:
  Fill(int64_t n, float value) : n_(n), value_(value) {}
  void launch(tandem::Stream&, void* const*, void* const* outputs, void*) override {
    float* y = static_cast<float*>(outputs[0]);
    for (int64_t i = 0; i < n_; ++i) y[i] = value_;
  }
  const char* describe() const noexcept override { return "hello:fill_f32"; }

 private:
  int64_t n_;
  float value_;
};

// copy: y = x (a CPU device: device memory is host memory).
class Copy : public tandem::Kernel {
 public:
  explicit Copy(size_t bytes) : bytes_(bytes) {}
  void launch(tandem::Stream&, void* const* inputs, void* const* outputs, void*) override {
    if (bytes_ != 0 && inputs[0] != outputs[0]) std::memmove(outputs[0], inputs[0], bytes_);
  }
  const char* describe() const noexcept override { return "hello:copy"; }

 private:
  size_t bytes_;
};

// add: y = a + b, elementwise (in-place on either input is safe).
class Add : public tandem::Kernel {
 public:
  explicit Add(int64_t n) : n_(n) {}
  void launch(tandem::Stream&, void* const* inputs, void* const* outputs, void*) override {
    const float* a = static_cast<const float*>(inputs[0]);
    const float* b = static_cast<const float*>(inputs[1]);
    float* y = static_cast<float*>(outputs[0]);
    for (int64_t i = 0; i < n_; ++i) y[i] = a[i] + b[i];
  }
  const char* describe() const noexcept override { return "hello:add_f32"; }

 private:
  int64_t n_;
};

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
    workspace_bytes = 0;
    const std::string name = op.op();
    if (name == "fill" && op.inputs().empty() && op.outputs().size() == 1) {
      require_f32_same_shape(op);
      return std::make_unique<Fill>(op.outputs()[0].numel(), static_cast<float>(op.float_attr("value", 0.0)));
    }
    if (name == "copy" && op.inputs().size() == 1 && op.outputs().size() == 1) {
      require_f32_same_shape(op);
      return std::make_unique<Copy>(op.outputs()[0].bytes());
    }
    if (name == "add" && op.inputs().size() == 2 && op.outputs().size() == 1) {
      require_f32_same_shape(op);
      return std::make_unique<Add>(op.outputs()[0].numel());
    }
    throw tandem::Unsupported("hello implements fill, copy and add only, not '" + name + "'");
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
  return tandem::backend_entry<HelloBackend>(
      host, host_abi_major, host_abi_minor,
      {"hello", "0.1.0", "Example backend: fill, copy, add on f32 (SDK example).", {}});
}
