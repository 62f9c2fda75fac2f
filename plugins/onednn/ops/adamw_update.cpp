// oneDNN backend — adamw_update: own code, one fused pass over
// param/grad/moments (the update is memory bound), threaded, in-place safe
// (each element is read before it is written).
#include <cmath>

#include "common.hpp"

namespace tandem::onednn {

namespace {

std::unique_ptr<Kernel> adamw_update(const OpView& op, size_t&) {
  Check c(op);
  c.counts(6, 6, 3, 3);
  c.primary_dtype(0, kF32);
  const Dims shape = c.in(0).dims;
  for (size_t i = 1; i < 4; ++i) c.input(i, TDM_F32, shape);
  c.input(4, TDM_F32, {});
  c.input(5, TDM_S32, {});
  for (size_t j = 0; j < 3; ++j) c.output(j, TDM_F32, shape);
  const double b1 = c.float_attr("beta1", 0.9), b2 = c.float_attr("beta2", 0.999);
  const float eps = float(c.float_attr("epsilon", 1e-8)), wd = float(c.float_attr("weight_decay", 0.01));
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1)) c.fail("beta1 and beta2 must lie in [0, 1)");
  const int64_t n = numel(shape);
  const std::string where = c.where();
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const int32_t step = *static_cast<const int32_t*>(in[5]);
    if (step < 1)
      throw Error(TDM_INVALID_ARGUMENT,
                  "onednn: " + where + ": step must be >= 1, got " + std::to_string(step));
    const float *param = static_cast<const float*>(in[0]), *grad = static_cast<const float*>(in[1]);
    const float *m = static_cast<const float*>(in[2]), *v = static_cast<const float*>(in[3]);
    const float lr = *static_cast<const float*>(in[4]);
    float *po = static_cast<float*>(out[0]), *mo = static_cast<float*>(out[1]),
          *vo = static_cast<float*>(out[2]);
    // Bias corrections in double, as PyTorch computes them on the host.
    const float bc1 = float(1.0 - std::pow(b1, double(step))), bc2 = float(1.0 - std::pow(b2, double(step)));
    const float fb1 = float(b1), fb2 = float(b2), cb1 = float(1.0 - b1), cb2 = float(1.0 - b2);
    const float decay = 1.f - lr * wd;
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const float g = grad[i];
      const float mi = fb1 * m[i] + cb1 * g;
      const float vi = fb2 * v[i] + cb2 * g * g;
      mo[i] = mi;
      vo[i] = vi;
      po[i] = param[i] * decay - lr * (mi / bc1) / (std::sqrt(vi / bc2) + eps);
    }
  });
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("adamw_update", adamw_update); });

}  // namespace

}  // namespace tandem::onednn
