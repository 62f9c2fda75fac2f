// Reference backend — rotary position embedding and its gradient.
//
// x is [..., T, D] with D even; the row at position p = position_offset + t
// is rotated pairwise, pairing element i with element i + D/2 (the halves
// layout of GPT-NeoX and Llama):
//   θ_i = p · f_i, f_i = base^(−2i/D) (or its llama3 scaling),
//   y_i = x_i·cos θ_i − x_{i+D/2}·sin θ_i,  y_{i+D/2} = x_{i+D/2}·cos θ_i + x_i·sin θ_i.
// rope_grad applies the inverse rotation (−θ) to dy. Angles in double.
#include <cmath>

#include "common.hpp"

namespace tandem::reference {
namespace {

std::unique_ptr<Kernel> rotation(const OpView& view, double direction) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  const Dims shape = c.in(0).dims;  // [..., T, D], D even (the shape rule)
  const int64_t D = shape.back(), T = shape[shape.size() - 2];
  const bool has_offset = c.has_input(1);
  const double base = c.float_attr("base");
  const bool llama3 = c.string_attr("scaling") == "llama3";
  const double factor = c.float_attr("factor"), low = c.float_attr("low_freq_factor"),
               high = c.float_attr("high_freq_factor"), context = double(c.int_attr("original_context"));
  const int64_t n = numel(shape), half = D / 2;
  // Llama 3.1's scaling, as its wavelengths: longer than context/low are
  // slowed by `factor`, shorter than context/high kept, blended between.
  auto frequency = [=](int64_t i) {
    const double f = std::pow(base, -2.0 * double(i) / double(D));
    if (!llama3) return f;
    const double wavelength = 2.0 * M_PI / f;
    if (wavelength > context / low) return f / factor;
    if (wavelength < context / high) return f;
    const double smooth = (context / wavelength - low) / (high - low);
    return (1.0 - smooth) * f / factor + smooth * f;
  };
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const int64_t offset = has_offset ? *static_cast<const int64_t*>(in[1]) : 0;
    const auto x = load<double>(in[0], dt, n);
    std::vector<double> y(x.size());
    for (int64_t row = 0; row < (D ? n / D : 0); ++row) {
      const double p = double(offset + row % T);
      const double* xr = x.data() + row * D;
      double* yr = y.data() + row * D;
      for (int64_t i = 0; i < half; ++i) {
        const double theta = direction * p * frequency(i);
        const double cs = std::cos(theta), sn = std::sin(theta);
        yr[i] = xr[i] * cs - xr[i + half] * sn;
        yr[i + half] = xr[i + half] * cs + xr[i] * sn;
      }
    }
    store(out[0], dt, y);
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("rope", [](const OpView& v, size_t&) { return rotation(v, 1.0); });
  r.add("rope_grad", [](const OpView& v, size_t&) { return rotation(v, -1.0); });
});

}  // namespace

}  // namespace tandem::reference
