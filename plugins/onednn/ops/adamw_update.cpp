// oneDNN backend — adamw_update: own code, one fused pass over
// param/grad/moments (the update is memory bound), threaded, in-place safe
// (each element is read before it is written); the arithmetic is
// vector_loops.hpp's, compiled for the CPU's vector level.
#include <cmath>

#include "common.hpp"
#include "vector_loops.hpp"

namespace tandem::onednn {

namespace {

std::unique_ptr<Kernel> adamw_update(const OpView& op, size_t&) {
  Check c(op);
  c.primary_dtype(0, kF32);
  const Dims shape = c.in(0).dims;
  const double b1 = c.float_attr("beta1"), b2 = c.float_attr("beta2");
  const float eps = float(c.float_attr("epsilon", 1e-8)), wd = float(c.float_attr("weight_decay", 0.01));
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
    const loops::AdamW h{float(b1),
                         float(b2),
                         float(1.0 - b1),
                         float(1.0 - b2),
                         float(1.0 - std::pow(b1, double(step))),
                         float(1.0 - std::pow(b2, double(step))),
                         lr,
                         eps,
                         1.f - lr * wd};
    over_chunks(n, loops::kUpdateChunk, [&](int64_t c0, int64_t len) {
      loops::adamw(h, param + c0, grad + c0, m + c0, v + c0, po + c0, mo + c0, vo + c0, len);
    });
  });
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("adamw_update", adamw_update); });

}  // namespace

}  // namespace tandem::onednn
