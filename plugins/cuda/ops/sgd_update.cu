// CUDA backend — sgd_update, one elementwise kernel. lr (f32[]) is a device
// scalar read by the kernel, so a schedule needs no re-prepare and no host
// sync. In-place launches are safe:
// each element is read before it is written, by the same thread. The math is
// math/optim.hpp (tested on the CPU).
#include "math/optim.hpp"
#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

__global__ void sgd_kernel(const float* param, const float* grad, const float* lr, const float* buf,
                           float* param_out, float* buf_out, int64_t n, math::SgdParams p) {
  const float rate = *lr;
  TDM_GRID_STRIDE(i, n) {
    float w = param[i];
    if (buf != nullptr) {
      float b = buf[i];
      math::sgd_step(p, rate, w, grad[i], &b);
      buf_out[i] = b;
    } else {
      math::sgd_step(p, rate, w, grad[i], nullptr);
    }
    param_out[i] = w;
  }
}

std::unique_ptr<Kernel> prepare_sgd(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.primary_dtype(0, kF32);
  const double momentum = v.float_attr("momentum", 0.0), dampening = v.float_attr("dampening", 0.0);
  const bool nesterov = v.int_attr("nesterov", 0) != 0;
  const bool has_buf = c.has_input(3);
  const math::SgdParams p =
      math::sgd_params(momentum, dampening, v.float_attr("weight_decay", 0.0), nesterov);
  const int64_t n = numel(c.in(0).dims);
  return make_kernel("sgd_update", [=](CudaStream& s, void* const* in, void* const* o, void*) {
    if (n == 0) return;
    auto f = [](void* q) { return static_cast<float*>(q); };
    sgd_kernel<<<grid_for(n), kThreads, 0, s.get()>>>(f(in[0]), f(in[1]), f(in[2]),
                                                      has_buf ? f(in[3]) : nullptr, f(o[0]),
                                                      has_buf ? f(o[1]) : nullptr, n, p);
  });
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("sgd_update", prepare_sgd); });

}  // namespace

}  // namespace tandem::cuda
