// oneDNN backend — fake_quant and fake_quant_grad (sdk/ops.md), the QAT
// pair: own OpenMP loops per channel run, the same single f32 operations as
// quantize (quant_params.hpp) so the bits equal the reference's; the grid
// comes from the attributes or, without `scale`, from x at every launch.
#include <algorithm>
#include <cmath>

#include "quant_params.hpp"

namespace tandem::onednn {
namespace {

// fake_quant and its straight-through gradient, per channel run; the grid
// comes from the attributes or, without `scale`, from x at every launch.
struct FakeQuant {
  QuantParams p;
  float qmin = 0, qmax = 255;
  bool dynamic = false;
};

FakeQuant fake_quant_params(const Check& c) {
  FakeQuant f;
  const int64_t qmin = c.int_attr("quant_min"), qmax = c.int_attr("quant_max");
  f.qmin = float(qmin);
  f.qmax = float(qmax);
  const Dims& dims = c.in(0).dims;
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
  f.p.scale.assign(size_t(f.p.channels), 1.f);
  f.p.zero.assign(size_t(f.p.channels), 0);
  return f;
}

// The grid of each group from the data's range (sdk/ops.md, fake_quant), in
// f32 exactly as the reference computes it. `x` is the fake_quant input.
QuantParams grid_of(const FakeQuant& f, const float* x, int64_t n) {
  if (!f.dynamic) return f.p;
  QuantParams p = f.p;
  const size_t groups = size_t(p.channels);
  std::vector<float> lo(groups, 0.f), hi(groups, 0.f);
  if (groups == 1) {
    float l = 0.f, h = 0.f;
#pragma omp parallel for simd reduction(min : l) reduction(max : h) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const float v = std::isnan(x[i]) ? 0.f : x[i];  // 0 never moves a range that already holds 0
      l = std::min(l, v);
      h = std::max(h, v);
    }
    lo[0] = l;
    hi[0] = h;
  } else {
    for (int64_t r = 0; r < n / p.inner; ++r) {
      const size_t ch = size_t(r % p.channels);
      for (int64_t i = r * p.inner; i < (r + 1) * p.inner; ++i) {
        if (std::isnan(x[i])) continue;
        lo[ch] = std::min(lo[ch], x[i]);
        hi[ch] = std::max(hi[ch], x[i]);
      }
    }
  }
  const int32_t zero = int32_t(std::clamp(0.f, f.qmin, f.qmax));
  for (size_t ch = 0; ch < groups; ++ch) {
    p.scale[ch] = 1.f;
    p.zero[ch] = zero;
    if (f.qmin == -f.qmax) {
      const float sc = std::max(-lo[ch], hi[ch]) / f.qmax;
      if (sc > 0) p.scale[ch] = sc, p.zero[ch] = 0;
    } else {
      const float sc = (hi[ch] - lo[ch]) / (f.qmax - f.qmin);
      if (sc > 0) {
        p.scale[ch] = sc;
        p.zero[ch] =
            int32_t(std::clamp(f.qmin - std::nearbyint(lo[ch] / sc), f.qmin, f.qmax));  // once per group
      }
    }
  }
  return p;
}

std::unique_ptr<Kernel> fake_quant(const OpView& op, size_t&) {
  Check c(op);
  c.primary_dtype(0, kF32);
  const FakeQuant f = fake_quant_params(c);
  const int64_t n = c.in(0).numel();
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const auto* x = static_cast<const float*>(in[0]);
    auto* y = static_cast<float*>(out[0]);
    const QuantParams p = grid_of(f, x, n);
    for_channels(p, n, [&](int64_t b, int64_t e, float s, int32_t z) {
#pragma omp parallel for simd schedule(static) if (p.channels == 1 && e - b > kParallelGrain)
      for (int64_t i = b; i < e; ++i)
        y[i] = std::isnan(x[i]) ? x[i] : float(quantize_one(x[i], s, z, f.qmin, f.qmax) - z) * s;
    });
  });
}

std::unique_ptr<Kernel> fake_quant_grad(const OpView& op, size_t&) {
  Check c(op);
  c.primary_dtype(0, kF32);
  const FakeQuant f = fake_quant_params(c);
  const int64_t n = c.in(0).numel();
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const auto* dy = static_cast<const float*>(in[0]);
    const auto* x = static_cast<const float*>(in[1]);
    auto* dx = static_cast<float*>(out[0]);
    const QuantParams p = grid_of(f, x, n);
    for_channels(p, n, [&](int64_t b, int64_t e, float s, int32_t z) {
#pragma omp parallel for simd schedule(static) if (p.channels == 1 && e - b > kParallelGrain)
      for (int64_t i = b; i < e; ++i) {
        // Clamped one step beyond the range: the comparison outcome is unchanged.
        const float r = std::min(std::max(x[i] / s, f.qmin - float(z) - 1.f), f.qmax - float(z) + 1.f);
        const float v = round_even(r) + float(z);
        dx[i] = v >= f.qmin && v <= f.qmax ? dy[i] : 0.f;
      }
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("fake_quant", fake_quant);
  r.add("fake_quant_grad", fake_quant_grad);
});

}  // namespace

}  // namespace tandem::onednn
