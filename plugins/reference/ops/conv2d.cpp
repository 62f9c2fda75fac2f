// Reference backend — conv2d and its two gradients.
//
// All three ops visit the same taps (conv_geometry.hpp): forward accumulates
// x·w into y, grad_input scatters dy·w into dx, grad_weight accumulates dy·x
// into dw; accumulators are double.
#include "conv_geometry.hpp"

namespace tandem::reference {
namespace {

std::unique_ptr<Kernel> conv2d(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const ConvGeometry g = geometry(c, c.in(0).dims, c.in(1).dims);
  const bool has_bias = c.has_input(2);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> x = load<T>(in[0], dt, numel(g.x())), w = load<T>(in[1], dt, numel(g.w()));
      std::vector<double> acc(size_t(numel(g.y())), 0.0);
      g.for_each_tap([&](int64_t yi, int64_t xi, int64_t wi) {
        acc[size_t(yi)] += double(x[size_t(xi)]) * double(w[size_t(wi)]);
      });
      std::vector<T> y(acc.size());
      const std::vector<T> bias = has_bias ? load<T>(in[2], dt, g.K) : std::vector<T>(size_t(g.K), T(0));
      for (size_t i = 0; i < y.size(); ++i)
        y[i] = T(T(acc[i]) + bias[size_t((int64_t(i) / (g.P * g.Q)) % g.K)]);
      store(out[0], dt, y);
    });
  });
}

std::unique_ptr<Kernel> conv2d_grad_input(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const ConvGeometry g = geometry(c, c.out(0).dims, c.in(1).dims);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> dy = load<T>(in[0], dt, numel(g.y())), w = load<T>(in[1], dt, numel(g.w()));
      std::vector<double> acc(size_t(numel(g.x())), 0.0);
      g.for_each_tap([&](int64_t yi, int64_t xi, int64_t wi) {
        acc[size_t(xi)] += double(dy[size_t(yi)]) * double(w[size_t(wi)]);
      });
      store(out[0], dt, std::vector<T>(acc.begin(), acc.end()));
    });
  });
}

std::unique_ptr<Kernel> conv2d_grad_weight(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const ConvGeometry g = geometry(c, c.in(1).dims, c.out(0).dims);
  const bool has_bias = c.int_attr("has_bias") != 0;  // the shape rule: dbias present exactly then
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> dy = load<T>(in[0], dt, numel(g.y())), x = load<T>(in[1], dt, numel(g.x()));
      std::vector<double> acc(size_t(numel(g.w())), 0.0);
      g.for_each_tap([&](int64_t yi, int64_t xi, int64_t wi) {
        acc[size_t(wi)] += double(dy[size_t(yi)]) * double(x[size_t(xi)]);
      });
      store(out[0], dt, std::vector<T>(acc.begin(), acc.end()));
      if (!has_bias) return;
      std::vector<double> db(size_t(g.K), 0.0);
      for (size_t i = 0; i < dy.size(); ++i) db[size_t((int64_t(i) / (g.P * g.Q)) % g.K)] += double(dy[i]);
      store(out[1], dt, std::vector<T>(db.begin(), db.end()));
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("conv2d", conv2d);
  r.add("conv2d_grad_input", conv2d_grad_input);
  r.add("conv2d_grad_weight", conv2d_grad_weight);
});

}  // namespace

}  // namespace tandem::reference
