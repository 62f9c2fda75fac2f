// A deliberately faulty backend for the kit's own tests (never installed).
//
// STANDIN_ABSENT=0 ("faulty"): f32 only —
//   mul    correct (the kit must PASS it against reference);
//   add    writes only the first half of its output (poisoning must catch it);
//   scale  adds 1e-3 per launch (the rerun check must call it irreproducible);
//   everything else UNSUPPORTED.
// STANDIN_ABSENT=1 ("absent"): loads, but reports its device unavailable, as
// a GPU backend does on a machine without a GPU.
#include <cstdlib>

#include "tandem/tandem.hpp"

namespace {

class StandInKernel final : public tandem::Kernel {
 public:
  StandInKernel(std::string op, int64_t n, double alpha, double beta)
      : op_(std::move(op)), n_(n), alpha_(alpha), beta_(beta) {}
  void launch(tandem::Stream&, void* const* in, void* const* out, void*) override {
    const auto* a = static_cast<const float*>(in[0]);
    auto* y = static_cast<float*>(out[0]);
    if (op_ == "mul") {
      const auto* b = static_cast<const float*>(in[1]);
      for (int64_t i = 0; i < n_; ++i) y[i] = a[i] * b[i];
    } else if (op_ == "add") {
      const auto* b = static_cast<const float*>(in[1]);
      for (int64_t i = 0; i < n_ / 2; ++i) y[i] = a[i] + b[i];  // the bug: half of it
    } else {
      static int64_t launches = 0;  // across kernels: the kit prepares once per run
      ++launches;
      for (int64_t i = 0; i < n_; ++i) y[i] = float(alpha_ * a[i] + beta_ + 1e-3 * double(launches));
    }
  }
  const char* describe() const noexcept override { return "standin"; }

 private:
  std::string op_;
  int64_t n_;
  double alpha_, beta_;
};

class StandInDevice final : public tandem::Device {
 public:
  tdm_device_info info() override {
    tdm_device_info i{};
    i.struct_size = sizeof i;
    i.name = "stand-in CPU";
    i.kind = TDM_DEVICE_CPU;
    i.host_addressable = 1;
    return i;
  }
  void* allocate(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) throw tandem::Error(TDM_OUT_OF_MEMORY, "out of memory");
    return p;
  }
  void deallocate(void* p) noexcept override { std::free(p); }
  std::unique_ptr<tandem::Kernel> prepare(const tandem::OpView& op, size_t& ws) override {
    ws = 0;
    const std::string name = op.op();
    if (name != "mul" && name != "add" && name != "scale") throw tandem::Unsupported("stand-in: no " + name);
    for (const auto& t : op.inputs())
      if (t.dtype != TDM_F32) throw tandem::Unsupported("stand-in: f32 only");
    const size_t arity = name == "scale" ? 1 : 2;
    if (op.inputs().size() != arity || (arity == 2 && op.inputs()[0].dims != op.inputs()[1].dims))
      throw tandem::Unsupported("stand-in: same-shape operands only");
    return std::make_unique<StandInKernel>(name, op.inputs()[0].numel(), op.float_attr("alpha", 1),
                                           op.float_attr("beta", 0));
  }
};

class StandInBackend final : public tandem::Backend {
 public:
  uint32_t device_count() override {
    if (STANDIN_ABSENT)
      throw tandem::Error(TDM_UNAVAILABLE, "stand-in: no accelerator on this machine (by design)");
    return 1;
  }
  tandem::Device& device(uint32_t) override { return device_; }

 private:
  StandInDevice device_;
};

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  return tandem::backend_entry<StandInBackend>(
      host, major, minor, {STANDIN_ABSENT ? "absent" : "faulty", "0.0.1", "conformance-kit test double", {}});
}
