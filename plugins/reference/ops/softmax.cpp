// Reference backend — softmax, log_softmax and their gradients.
//
// Computed entirely in double (softmax_rows.hpp: exp/log of each row,
// shifted by its maximum) and rounded once on store.
#include <cmath>

#include "softmax_rows.hpp"

namespace tandem::reference {
namespace {

std::unique_ptr<Kernel> softmax(const OpView& view, bool log) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const Dims shape = c.in(0).dims;
  const Rows r = rows_around(shape, c.axis(c.int_attr("axis"), shape.size(), "axis"));  // in range (the rule)
  return make_kernel(c, [=](void* const* in, void* const* out) {
    std::vector<double> y = log_softmax_rows(load<double>(in[0], dt, numel(shape)), r);
    if (!log)
      for (double& v : y) v = std::exp(v);
    store(out[0], dt, y);
  });
}

// softmax_grad:     dx = y·(dy - Σ_k dy·y)
// log_softmax_grad: dx = dy - exp(y)·Σ_k dy
std::unique_ptr<Kernel> softmax_grad(const OpView& view, bool log) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const Dims shape = c.in(0).dims;
  const Rows r = rows_around(shape, c.axis(c.int_attr("axis"), shape.size(), "axis"));  // in range (the rule)
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const std::vector<double> dy = load<double>(in[0], dt, numel(shape)),
                              y = load<double>(in[1], dt, numel(shape));
    std::vector<double> dx(dy.size());
    for (int64_t o = 0; o < r.outer; ++o)
      for (int64_t i = 0; i < r.inner; ++i) {
        double s = 0;
        for (int64_t k = 0; k < r.n; ++k)
          s += log ? dy[size_t(r.at(o, k, i))] : dy[size_t(r.at(o, k, i))] * y[size_t(r.at(o, k, i))];
        for (int64_t k = 0; k < r.n; ++k) {
          const size_t e = size_t(r.at(o, k, i));
          dx[e] = log ? dy[e] - std::exp(y[e]) * s : y[e] * (dy[e] - s);
        }
      }
    store(out[0], dt, dx);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("softmax", [](const OpView& v, size_t&) { return softmax(v, false); });
  r.add("log_softmax", [](const OpView& v, size_t&) { return softmax(v, true); });
  r.add("softmax_grad", [](const OpView& v, size_t&) { return softmax_grad(v, false); });
  r.add("log_softmax_grad", [](const OpView& v, size_t&) { return softmax_grad(v, true); });
});

}  // namespace

}  // namespace tandem::reference
