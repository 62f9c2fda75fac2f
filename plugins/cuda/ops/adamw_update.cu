// CUDA backend — adamw_update, one elementwise kernel. lr (f32[]) and step
// (s32[]) are device scalars read by the kernel, so a schedule needs no
// re-prepare and no host sync. In-place launches are safe: each element is
// read before it is written, by the same thread. The math is math/optim.hpp
// (tested on the CPU).
#include "math/optim.hpp"
#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

__global__ void adamw_kernel(const float* param, const float* grad, const float* m, const float* v,
                             const float* lr, const int32_t* step, float* param_out, float* m_out,
                             float* v_out, int64_t n, math::AdamwParams a) {
  const float rate = *lr;
  const int t = *step;
  // step < 1 is invalid (1 - beta^0 = 0): the update becomes NaN, visibly.
  const math::BiasCorrection bc = math::bias_correction(a, t);
  TDM_GRID_STRIDE(i, n) {
    float w = param[i], mm = m[i], vv = v[i];
    math::adamw_step(a, bc, rate, w, grad[i], mm, vv);
    param_out[i] = w, m_out[i] = mm, v_out[i] = vv;
  }
}

std::unique_ptr<Kernel> prepare_adamw(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.primary_dtype(0, kF32);
  const double b1 = v.float_attr("beta1", 0.9), b2 = v.float_attr("beta2", 0.999);
  const math::AdamwParams a =
      math::adamw_params(b1, b2, v.float_attr("epsilon", 1e-8), v.float_attr("weight_decay", 0.01));
  const int64_t n = numel(c.in(0).dims);
  return make_kernel("adamw_update", [=](CudaStream& s, void* const* in, void* const* o, void*) {
    if (n == 0) return;
    auto f = [](void* q) { return static_cast<float*>(q); };
    adamw_kernel<<<grid_for(n), kThreads, 0, s.get()>>>(f(in[0]), f(in[1]), f(in[2]), f(in[3]), f(in[4]),
                                                        static_cast<const int32_t*>(in[5]), f(o[0]), f(o[1]),
                                                        f(o[2]), n, a);
  });
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("adamw_update", prepare_adamw); });

}  // namespace

}  // namespace tandem::cuda
