// Reference backend — rms_norm and its gradient.
//
// Per row of the last dim D, in double: rstd = 1/sqrt(mean(x²) + epsilon),
// y = x·rstd·gamma; the saved rstd is f32 (f64 when x is f64). The gradient,
// with x̂ = x·rstd and g = dy·gamma: dx = rstd·(g − x̂·mean_D(g·x̂)),
// dgamma = Σ_rows dy·x̂.
#include <cmath>

#include "common.hpp"

namespace tandem::reference {
namespace {

tdm_dtype stat_dtype(tdm_dtype x) {
  return x == TDM_F64 ? TDM_F64 : TDM_F32;
}

std::unique_ptr<Kernel> rms_norm(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims shape = c.in(0).dims;
  const int64_t D = shape.back(), rows = numel(shape) / (D ? D : 1);
  const tdm_dtype st = stat_dtype(dt);
  const double eps = c.float_attr("epsilon");
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const auto x = load<double>(in[0], dt, rows * D), gamma = load<double>(in[1], dt, D);
    std::vector<double> y(x.size()), rstd(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const double* xr = x.data() + r * D;
      double sq = 0;
      for (int64_t d = 0; d < D; ++d) sq += xr[d] * xr[d];
      const double rs = 1.0 / std::sqrt(sq / double(D) + eps);
      for (int64_t d = 0; d < D; ++d) y[size_t(r * D + d)] = xr[d] * rs * gamma[size_t(d)];
      rstd[size_t(r)] = rs;
    }
    store(out[0], dt, y);
    store(out[1], st, rstd);
  });
}

std::unique_ptr<Kernel> rms_norm_grad(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims shape = c.in(0).dims;
  const int64_t D = shape.back(), rows = numel(shape) / (D ? D : 1);
  const tdm_dtype st = stat_dtype(dt);
  const bool addend = c.has_input(4);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const auto dy = load<double>(in[0], dt, rows * D), x = load<double>(in[1], dt, rows * D);
    const auto base = addend ? load<double>(in[4], dt, rows * D) : std::vector<double>{};
    const auto gamma = load<double>(in[2], dt, D), rstd = load<double>(in[3], st, rows);
    std::vector<double> dx(x.size()), dgamma(size_t(D), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const double rs = rstd[size_t(r)];
      double mean_gx = 0;
      for (int64_t d = 0; d < D; ++d) {
        const size_t e = size_t(r * D + d);
        const double xhat = x[e] * rs;
        mean_gx += dy[e] * gamma[size_t(d)] * xhat / double(D);
        dgamma[size_t(d)] += dy[e] * xhat;
      }
      for (int64_t d = 0; d < D; ++d) {
        const size_t e = size_t(r * D + d);
        dx[e] = rs * (dy[e] * gamma[size_t(d)] - x[e] * rs * mean_gx) + (addend ? base[e] : 0.0);
      }
    }
    store(out[0], dt, dx);
    store(out[1], dt, dgamma);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("rms_norm", rms_norm);
  r.add("rms_norm_grad", rms_norm_grad);
});

}  // namespace

}  // namespace tandem::reference
