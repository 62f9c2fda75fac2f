// Reference backend — conv2d_int8 (sdk/ops.md): u8 x, s8 w, exact s32 sums
// over the real taps (conv_geometry.hpp) of (x − x_zero_point)·w (a padded
// tap is a real 0.0, i.e. the zero point, and adds nothing), then
// act(f32(acc)·f32(x_scale·w_scale[k]) + bias).
#include <cmath>

#include "conv_geometry.hpp"

namespace tandem::reference {
namespace {

std::unique_ptr<Kernel> conv2d_int8(const OpView& view, size_t&) {
  Check c(view);
  c.primary_dtype(0, {TDM_U8});
  const ConvGeometry g = geometry(c, c.in(0).dims, c.in(1).dims);
  const bool has_bias = c.has_input(2);
  // The shape rule has checked the scales (1 or K of w_scale, positive and
  // finite in f32) and that C/groups·R·S <= 65536 keeps the s32 sums exact.
  const double sx = c.float_attr("x_scale", -1);
  const int64_t zx = c.int_attr("x_zero_point");
  const std::vector<double> sw = c.floats_attr("w_scale");
  const std::string act = c.string_attr("activation");  // none or relu (the catalog)
  std::vector<float> m;
  for (int64_t k = 0; k < g.K; ++k) m.push_back(float(sx) * float(sw[sw.size() == 1 ? 0 : size_t(k)]));
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const auto* x = static_cast<const uint8_t*>(in[0]);
    const auto* w = static_cast<const int8_t*>(in[1]);
    const auto* bias = static_cast<const float*>(in[2]);
    std::vector<int32_t> acc(size_t(numel(g.y())), 0);
    g.for_each_tap([&](int64_t yi, int64_t xi, int64_t wi) {
      acc[size_t(yi)] += (int32_t(x[xi]) - int32_t(zx)) * int32_t(w[wi]);
    });
    auto* y = static_cast<float*>(out[0]);
    for (size_t i = 0; i < acc.size(); ++i) {
      const size_t k = size_t((int64_t(i) / (g.P * g.Q)) % g.K);
      float v = float(acc[i]) * m[k] + (has_bias ? bias[k] : 0.f);
      if (act == "relu" && v < 0) v = 0;
      y[i] = v;
    }
  });
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("conv2d_int8", conv2d_int8); });

}  // namespace

}  // namespace tandem::reference
