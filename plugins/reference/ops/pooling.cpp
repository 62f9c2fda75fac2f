// Reference backend — max_pool2d, avg_pool2d and their gradients.
//
// Output size P = floor((H + 2*pad - kernel) / stride) + 1 (no ceil mode).
// Padding must be at most half the kernel (as PyTorch), so every window
// holds at least one real element. max: padded positions count as -inf, the
// first maximum in row-major window order wins (it alone gets the gradient),
// and a NaN beats any number (NaN propagates). avg: the divisor is the number
// of real elements in the window, or kernel_h*kernel_w with count_include_pad.
#include <cmath>

#include "common.hpp"

namespace tandem::reference {
namespace {

struct PoolGeometry {
  int64_t N, C, H, W, P, Q;
  int64_t kh, kw, sh, sw, ph, pw;
  bool count_include_pad;

  Dims x() const { return {N, C, H, W}; }
  Dims y() const { return {N, C, P, Q}; }

  // f(y_index, x_indices of the real elements of its window, in row-major
  // window order).
  template <class F>
  void for_each_window(F&& f) const {
    std::vector<int64_t> taps;
    for (int64_t nc = 0; nc < N * C; ++nc)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          taps.clear();
          for (int64_t r = 0; r < kh; ++r)
            for (int64_t s = 0; s < kw; ++s) {
              const int64_t h = p * sh - ph + r, w = q * sw - pw + s;
              if (h >= 0 && h < H && w >= 0 && w < W) taps.push_back((nc * H + h) * W + w);
            }
          f((nc * P + p) * Q + q, taps);
        }
  }
  double divisor(size_t real_taps) const { return count_include_pad ? double(kh * kw) : double(real_taps); }
};

// image: NCHW dims of x (forward, max grad) or of dx (avg grad: output 0).
// The shape rule of every caller (pool_output in
// tandem/op_shapes_products.hpp) has checked them: rank 4, the kernel given,
// kernel and stride >= 1, padding in [0, kernel/2], a window that fits.
PoolGeometry geometry(const Check& c, const Dims& image) {
  PoolGeometry g{};
  const auto k = c.pair_attr("kernel", {});
  const auto stride = c.pair_attr("stride", k), pad = c.pair_attr("padding", {0, 0});
  g.kh = k[0], g.kw = k[1], g.sh = stride[0], g.sw = stride[1], g.ph = pad[0], g.pw = pad[1];
  g.count_include_pad = c.int_attr("count_include_pad", 0) != 0;
  g.N = image[0], g.C = image[1], g.H = image[2], g.W = image[3];
  const int64_t span_h = g.H + 2 * g.ph - g.kh, span_w = g.W + 2 * g.pw - g.kw;
  g.P = span_h / g.sh + 1, g.Q = span_w / g.sw + 1;
  return g;
}

// Index into `taps` of the winning element: first maximum, NaN wins.
template <class T>
size_t argmax(const std::vector<T>& x, const std::vector<int64_t>& taps) {
  size_t best = 0;
  for (size_t t = 1; t < taps.size(); ++t) {
    const T v = x[size_t(taps[t])], b = x[size_t(taps[best])];
    if (std::isnan(b)) break;
    if (v > b || std::isnan(v)) best = t;
  }
  return best;
}

std::unique_ptr<Kernel> max_pool2d(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const PoolGeometry g = geometry(c, c.in(0).dims);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> x = load<T>(in[0], dt, numel(g.x()));
      std::vector<T> y(size_t(numel(g.y())));
      g.for_each_window([&](int64_t yi, const std::vector<int64_t>& taps) {
        y[size_t(yi)] = x[size_t(taps[argmax(x, taps)])];
      });
      store(out[0], dt, y);
    });
  });
}

std::unique_ptr<Kernel> max_pool2d_grad(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const PoolGeometry g = geometry(c, c.in(1).dims);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> dy = load<T>(in[0], dt, numel(g.y())), x = load<T>(in[1], dt, numel(g.x()));
      std::vector<double> dx(x.size(), 0.0);
      g.for_each_window([&](int64_t yi, const std::vector<int64_t>& taps) {
        dx[size_t(taps[argmax(x, taps)])] += double(dy[size_t(yi)]);
      });
      store(out[0], dt, std::vector<T>(dx.begin(), dx.end()));
    });
  });
}

std::unique_ptr<Kernel> avg_pool2d(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const PoolGeometry g = geometry(c, c.in(0).dims);
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> x = load<T>(in[0], dt, numel(g.x()));
      std::vector<T> y(size_t(numel(g.y())));
      g.for_each_window([&](int64_t yi, const std::vector<int64_t>& taps) {
        double sum = 0;
        for (int64_t xi : taps) sum += double(x[size_t(xi)]);
        y[size_t(yi)] = T(sum / g.divisor(taps.size()));
      });
      store(out[0], dt, y);
    });
  });
}

std::unique_ptr<Kernel> avg_pool2d_grad(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const PoolGeometry g = geometry(c, c.out(0).dims);  // dx carries H and W
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> dy = load<T>(in[0], dt, numel(g.y()));
      std::vector<double> dx(size_t(numel(g.x())), 0.0);
      g.for_each_window([&](int64_t yi, const std::vector<int64_t>& taps) {
        for (int64_t xi : taps) dx[size_t(xi)] += double(dy[size_t(yi)]) / g.divisor(taps.size());
      });
      store(out[0], dt, std::vector<T>(dx.begin(), dx.end()));
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("max_pool2d", max_pool2d);
  r.add("max_pool2d_grad", max_pool2d_grad);
  r.add("avg_pool2d", avg_pool2d);
  r.add("avg_pool2d_grad", avg_pool2d_grad);
});

}  // namespace

}  // namespace tandem::reference
