// Reference backend — adamw_update (PyTorch's AdamW).
//
// Elementwise in the compute type (float for f32); hyperparameters are
// rounded to it once. lr and step are device scalars so schedules need no
// re-prepare. Outputs may alias inputs as the catalog allows: all inputs are
// loaded before any output is stored.
#include <cmath>

#include "common.hpp"

namespace tandem::reference {
namespace {

// adamw: param *= 1 - lr·wd; m = β1·m + (1-β1)·g; v = β2·v + (1-β2)·g²;
// param -= lr·m̂/(sqrt(v̂) + eps), m̂ = m/(1-β1^t), v̂ = v/(1-β2^t), t = step ≥ 1.
std::unique_ptr<Kernel> adamw_update(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const Dims shape = c.in(0).dims;
  const double b1 = c.float_attr("beta1"), b2 = c.float_attr("beta2");
  const double eps = c.float_attr("epsilon", 1e-8), wd = c.float_attr("weight_decay", 0.01);
  const std::string where = c.where();
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const int64_t step = load_int(in[5], TDM_S32, 0);
    if (step < 1)
      throw Error(TDM_INVALID_ARGUMENT, where + ": step must be >= 1, got " + std::to_string(step));
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const int64_t n = numel(shape);
      std::vector<T> param = load<T>(in[0], dt, n), m = load<T>(in[2], dt, n), v = load<T>(in[3], dt, n);
      const std::vector<T> grad = load<T>(in[1], dt, n);
      const T lr = load<T>(in[4], dt, 1)[0];
      // Bias corrections in double, as PyTorch computes them on the host.
      const T bc1 = T(1.0 - std::pow(b1, double(step))), bc2 = T(1.0 - std::pow(b2, double(step)));
      for (size_t i = 0; i < param.size(); ++i) {
        param[i] *= T(1) - lr * T(wd);
        m[i] = T(b1) * m[i] + T(1.0 - b1) * grad[i];
        v[i] = T(b2) * v[i] + T(1.0 - b2) * grad[i] * grad[i];
        param[i] -= lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + T(eps));
      }
      store(out[0], dt, param);
      store(out[1], dt, m);
      store(out[2], dt, v);
    });
  });
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("adamw_update", adamw_update); });

}  // namespace

}  // namespace tandem::reference
