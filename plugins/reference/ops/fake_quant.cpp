// Reference backend — fake_quant / fake_quant_grad (sdk/ops.md), the QAT pair,
// with a fixed grid (attributes) or one taken from x at every launch.
//
// Integer arithmetic is exact (s32 accumulators checked against the K bound
// at prepare); the floating steps are the catalog's single f32 operations
// (x / s, (q − z) · s), done in the same type as every other backend so the
// quantized bits agree exactly.
#include <algorithm>
#include <cmath>

#include "quant_params.hpp"

namespace tandem::reference {
namespace {

// Shared by fake_quant and its gradient: the clipping range, either from
// the attributes or, without `scale`, from x at every launch (QAT).
struct FakeQuant {
  QuantParams p;
  int64_t qmin = 0, qmax = 255;
  bool dynamic = false;
};

FakeQuant fake_quant_params(const Check& c, const Dims& dims) {
  FakeQuant f;
  f.qmin = c.int_attr("quant_min");
  f.qmax = c.int_attr("quant_max");
  if (c.op().attr("scale") != nullptr) {
    f.p = quant_params(c, dims);
    return f;
  }
  f.dynamic = true;
  if (c.int_attr("per_channel") != 0) {
    const size_t axis = c.axis(c.int_attr("axis", 1), dims.size(), "axis");
    f.p.channels = dims[axis];
    for (size_t d = axis + 1; d < dims.size(); ++d) f.p.inner *= dims[d];
  }
  return f;
}

// The grid of each group from x's own range (sdk/ops.md, fake_quant), in T.
template <class T>
QuantParams grid_of(const FakeQuant& f, const std::vector<T>& x) {
  if (!f.dynamic) return f.p;
  QuantParams p = f.p;
  std::vector<T> lo(size_t(p.channels), T(0)), hi(size_t(p.channels), T(0));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) continue;
    const size_t ch = size_t(p.channel_of(int64_t(i)));
    lo[ch] = std::min(lo[ch], x[i]);
    hi[ch] = std::max(hi[ch], x[i]);
  }
  p.scale.assign(size_t(p.channels), 1.0);
  p.zero.assign(size_t(p.channels), std::clamp<int64_t>(0, f.qmin, f.qmax));
  for (size_t ch = 0; ch < size_t(p.channels); ++ch) {
    if (f.qmin == -f.qmax) {
      const T s = std::max(-lo[ch], hi[ch]) / T(f.qmax);
      if (s > 0) p.scale[ch] = double(s), p.zero[ch] = 0;
    } else {
      const T s = (hi[ch] - lo[ch]) / T(f.qmax - f.qmin);
      if (s > 0) {
        p.scale[ch] = double(s);
        p.zero[ch] = std::clamp<int64_t>(f.qmin - int64_t(std::nearbyint(lo[ch] / s)), f.qmin, f.qmax);
      }
    }
  }
  return p;
}

// ---- fake_quant: y = (clamp(round(x/s) + z, qmin, qmax) − z) · s
std::unique_ptr<Kernel> fake_quant(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const FakeQuant f = fake_quant_params(c, c.in(0).dims);
  const int64_t n = c.in(0).numel();
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> x = load<T>(in[0], dt, n);
      const QuantParams p = grid_of(f, x);
      std::vector<T> y(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const size_t ch = size_t(p.channel_of(i));
        const T s = T(p.scale[ch]);
        const int64_t z = p.zero[ch];
        y[size_t(i)] = std::isnan(x[size_t(i)])
                           ? x[size_t(i)]
                           : T(quantize_one<T>(x[size_t(i)], s, z, f.qmin, f.qmax) - z) * s;
      }
      store(out[0], dt, y);
    });
  });
}

// ---- fake_quant_grad: dx = dy inside the clipping range, else 0
std::unique_ptr<Kernel> fake_quant_grad(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const FakeQuant f = fake_quant_params(c, c.in(0).dims);
  const int64_t n = c.in(0).numel();
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> dy = load<T>(in[0], dt, n), x = load<T>(in[1], dt, n);
      const QuantParams p = grid_of(f, x);
      std::vector<T> dx(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const size_t ch = size_t(p.channel_of(i));
        const T v = std::nearbyint(x[size_t(i)] / T(p.scale[ch])) + T(p.zero[ch]);
        dx[size_t(i)] = v >= T(f.qmin) && v <= T(f.qmax) ? dy[size_t(i)] : T(0);
      }
      store(out[0], dt, dx);
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("fake_quant", fake_quant);
  r.add("fake_quant_grad", fake_quant_grad);
});

}  // namespace

}  // namespace tandem::reference
