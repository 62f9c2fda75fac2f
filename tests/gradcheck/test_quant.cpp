// Gradient check of fake_quant (quantization-aware training).
//
// fake_quant is piecewise constant, so its true derivative is 0 almost
// everywhere and a finite difference with h ~ 1e-6 says nothing. What the
// catalog defines instead is the straight-through estimator: the exact
// derivative of the clipping function c(x) = clamp(x, (qmin − z)·s,
// (qmax − z)·s), from which fake_quant differs by at most s/2. So:
//   1. |fake_quant(x) − c(x)| ≤ s/2 everywhere (the forward is c, rounded);
//   2. a central difference of L = Σ r·fake_quant(x) with a wide step
//      h = 64·s (many grid steps, so the rounding averages out: error
//      ≤ s/h = 1/64 per element) matches fake_quant_grad's dx = r inside
//      the range and 0 outside, for x kept at least h away from the clip
//      edges.
// A gradient with the wrong clip edge, a zero point left out, or the wrong
// channel's scale fails both.
#include <algorithm>
#include <cmath>

#include "gradcheck.hpp"

namespace gradcheck {

TEST_F(Grad, FakeQuantStraightThrough) {
  struct Cfg {
    Dims shape;
    std::vector<double> scale;
    int64_t zero, qmin, qmax;
  };
  const Cfg cfgs[] = {{{5, 7}, {0.01}, 100, 0, 255},  // u8 activations with a zero point
                      {{3, 4, 6}, {0.004, 0.008, 0.002, 0.006}, 0, -127, 127}};  // s8 weights, per channel
  for (const Cfg& cfg : cfgs) {
    Attrs a = Attrs().floats("scale", cfg.scale).ints("zero_point", {cfg.zero});
    a.integer("quant_min", cfg.qmin).integer("quant_max", cfg.qmax).integer("axis", 1);
    SCOPED_TRACE(a.str());
    const int64_t channels = int64_t(cfg.scale.size());
    const int64_t inner = channels == 1 ? 1 : cfg.shape[2];
    auto scale_of = [&](int64_t i) { return cfg.scale[size_t(channels == 1 ? 0 : (i / inner) % channels)]; };
    // x: half inside the clipping range, half outside, each at least h from an edge.
    HostTensor x = random(cfg.shape, Fill::range(0, 1));
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double s = scale_of(i), h = 64 * s;
      const double lo = double(cfg.qmin - cfg.zero) * s, hi = double(cfg.qmax - cfg.zero) * s;
      const double u = x.get(i);
      if (i % 2 == 0)
        x.set(i, lo + h + u * (hi - lo - 2 * h));
      else
        x.set(i, i % 4 == 1 ? hi + h + u : lo - h - u);
    }
    const TensorShape out(F64, cfg.shape);
    const HostTensor y = run1("fake_quant", a, {x}, out);
    HostTensor r = random(cfg.shape);
    const HostTensor dx = run1("fake_quant_grad", a, {r, x}, out);
    HostTensor xp = x, xm = x;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double s = scale_of(i), h = 64 * s;
      const double lo = double(cfg.qmin - cfg.zero) * s, hi = double(cfg.qmax - cfg.zero) * s;
      EXPECT_LE(std::fabs(y.get(i) - std::clamp(x.get(i), lo, hi)), s / 2 * (1 + 1e-9)) << "element " << i;
      xp.set(i, x.get(i) + h);
      xm.set(i, x.get(i) - h);
    }
    // Elementwise op: perturbing every element at once gives every element's
    // own difference quotient.
    const HostTensor yp = run1("fake_quant", a, {xp}, out), ym = run1("fake_quant", a, {xm}, out);
    int inside = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double h = 64 * scale_of(i);
      const double numeric = r.get(i) * (yp.get(i) - ym.get(i)) / (2 * h);
      EXPECT_NEAR(dx.get(i), numeric, std::fabs(r.get(i)) / 64 + 1e-12) << "element " << i;
      inside += dx.get(i) != 0 ? 1 : 0;
    }
    EXPECT_EQ(inside, (x.numel() + 1) / 2);  // exactly the elements placed inside pass the gradient
  }
}

}  // namespace gradcheck
