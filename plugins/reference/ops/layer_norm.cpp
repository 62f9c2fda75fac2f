// Reference backend — layer_norm and its gradient.
//
// Statistics and the normalisation itself are computed in double and rounded
// once on store. The variance used to normalise is biased (divides by the
// count); rstd = 1/sqrt(var + epsilon). The saved statistics (mean, rstd)
// are f32, or f64 when x is f64.
#include <cmath>

#include "common.hpp"

namespace tandem::reference {
namespace {

tdm_dtype stat_dtype(tdm_dtype x) {
  return x == TDM_F64 ? TDM_F64 : TDM_F32;
}

// ---- layer_norm over the last dim D; rows = numel / D.
std::unique_ptr<Kernel> layer_norm(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims shape = c.in(0).dims;
  const int64_t D = shape.back(), rows = numel(shape) / (D ? D : 1);
  const tdm_dtype st = stat_dtype(dt);
  const double eps = epsilon_attr(c);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const auto x = load<double>(in[0], dt, rows * D), gamma = load<double>(in[1], dt, D),
               beta = load<double>(in[2], dt, D);
    std::vector<double> y(x.size()), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const double* xr = x.data() + r * D;
      double m = 0, var = 0;
      for (int64_t d = 0; d < D; ++d) m += xr[d];
      m /= double(D);
      for (int64_t d = 0; d < D; ++d) var += (xr[d] - m) * (xr[d] - m);
      var /= double(D);
      const double rs = 1.0 / std::sqrt(var + eps);
      for (int64_t d = 0; d < D; ++d)
        y[size_t(r * D + d)] = (xr[d] - m) * rs * gamma[size_t(d)] + beta[size_t(d)];
      mean[size_t(r)] = m;
      rstd[size_t(r)] = rs;
    }
    store(out[0], dt, y);
    store(out[1], st, mean);
    store(out[2], st, rstd);
  });
}

// ---- layer_norm_grad: with x̂ = (x - mean)·rstd and g = dy·gamma,
//   dx = rstd·(g - mean_D(g) - x̂·mean_D(g·x̂)) (+ addend), dgamma = Σ_rows dy·x̂, dbeta = Σ_rows dy.
std::unique_ptr<Kernel> layer_norm_grad(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims shape = c.in(0).dims;
  const int64_t D = shape.back(), rows = numel(shape) / (D ? D : 1);
  const tdm_dtype st = stat_dtype(dt);
  const bool addend = c.has_input(5);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const auto dy = load<double>(in[0], dt, rows * D), x = load<double>(in[1], dt, rows * D);
    const auto base = addend ? load<double>(in[5], dt, rows * D) : std::vector<double>{};
    const auto gamma = load<double>(in[2], dt, D), mean = load<double>(in[3], st, rows),
               rstd = load<double>(in[4], st, rows);
    std::vector<double> dx(x.size()), dgamma(size_t(D), 0.0), dbeta(size_t(D), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double mean_g = 0, mean_gx = 0;
      for (int64_t d = 0; d < D; ++d) {
        const size_t e = size_t(r * D + d);
        const double xhat = (x[e] - mean[size_t(r)]) * rstd[size_t(r)], g = dy[e] * gamma[size_t(d)];
        mean_g += g / double(D);
        mean_gx += g * xhat / double(D);
        dgamma[size_t(d)] += dy[e] * xhat;
        dbeta[size_t(d)] += dy[e];
      }
      for (int64_t d = 0; d < D; ++d) {
        const size_t e = size_t(r * D + d);
        const double xhat = (x[e] - mean[size_t(r)]) * rstd[size_t(r)], g = dy[e] * gamma[size_t(d)];
        dx[e] = rstd[size_t(r)] * (g - mean_g - xhat * mean_gx) + (addend ? base[e] : 0.0);
      }
    }
    store(out[0], dt, dx);
    store(out[1], dt, dgamma);
    store(out[2], dt, dbeta);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("layer_norm", layer_norm);
  r.add("layer_norm_grad", layer_norm_grad);
});

}  // namespace

}  // namespace tandem::reference
