// Reference backend — rotary position embedding and its gradient.
//
// x is [..., T, D] with D even; the row at position p = position_offset + t
// is rotated pairwise, pairing element i with element i + D/2 (the halves
// layout of GPT-NeoX and Llama):
//   θ_i = p · base^(−2i/D),
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
  const int64_t n = numel(shape), half = D / 2;
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const int64_t offset = has_offset ? *static_cast<const int64_t*>(in[1]) : 0;
    const auto x = load<double>(in[0], dt, n);
    std::vector<double> y(x.size());
    for (int64_t row = 0; row < (D ? n / D : 0); ++row) {
      const double p = double(offset + row % T);
      const double* xr = x.data() + row * D;
      double* yr = y.data() + row * D;
      for (int64_t i = 0; i < half; ++i) {
        const double theta = direction * p * std::pow(base, -2.0 * double(i) / double(D));
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
