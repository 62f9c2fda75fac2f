// oneDNN backend — sgd_update: own code, one fused pass over
// param/grad/momentum (the update is memory bound), threaded, in-place safe
// (each element is read before it is written).
#include "common.hpp"

namespace tandem::onednn {

namespace {

// The loops take every scalar as a local and nesterov as a template
// parameter: read through the kernel's closure, GCC reloaded them for every
// element (a store to the output might change them) and kept the loop scalar,
// which made the gemm_mlp benchmark's update (84 MB of traffic) take 3.8 ms a
// step instead of 1.2 ms on 2 threads of the AVX2-limited test machine.
void plain_step(const float* param, const float* grad, float* po, int64_t n, float lr, float wd) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) po[i] = param[i] - lr * (grad[i] + wd * param[i]);
}

template <bool kNesterov>
void momentum_step(const float* param, const float* grad, const float* buf, float* po, float* bo, int64_t n,
                   float lr, float wd, float momentum, float damp) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] + wd * param[i];
    const float b = momentum * buf[i] + damp * g;
    bo[i] = b;
    po[i] = param[i] - lr * (kNesterov ? g + momentum * b : b);
  }
}

std::unique_ptr<Kernel> sgd_update(const OpView& op, size_t&) {
  Check c(op);
  c.counts(3, 4, 1, 2);
  c.primary_dtype(0, kF32);
  const Dims shape = c.in(0).dims;
  c.input(1, TDM_F32, shape);
  c.input(2, TDM_F32, {});
  const float momentum = float(c.float_attr("momentum", 0.0)),
              dampening = float(c.float_attr("dampening", 0.0));
  const float wd = float(c.float_attr("weight_decay", 0.0));
  const bool nesterov = c.int_attr("nesterov", 0) != 0, has_buf = c.has_input(3);
  if ((momentum != 0.f) != has_buf)
    c.fail("momentum_buf (input 3) must be present exactly when momentum != 0");
  if (has_buf != c.has_output(1))
    c.fail("momentum_buf_out (output 1) must be present exactly when input 3 is");
  if (nesterov && (momentum <= 0.f || dampening != 0.f))
    c.fail("nesterov needs momentum > 0 and dampening = 0");
  c.output(0, TDM_F32, shape);
  if (has_buf) {
    c.input(3, TDM_F32, shape);
    c.output(1, TDM_F32, shape);
  }
  const int64_t n = numel(shape);
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const float* param = static_cast<const float*>(in[0]);
    const float* grad = static_cast<const float*>(in[1]);
    const float lr = *static_cast<const float*>(in[2]);
    float* po = static_cast<float*>(out[0]);
    if (!has_buf) return plain_step(param, grad, po, n, lr, wd);
    const float* buf = static_cast<const float*>(in[3]);
    float* bo = static_cast<float*>(out[1]);
    if (nesterov)
      momentum_step<true>(param, grad, buf, po, bo, n, lr, wd, momentum, 1.f - dampening);
    else
      momentum_step<false>(param, grad, buf, po, bo, n, lr, wd, momentum, 1.f - dampening);
  });
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("sgd_update", sgd_update); });

}  // namespace

}  // namespace tandem::onednn
