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
  c.input_dtype(1, {TDM_S8});
  const ConvGeometry g = geometry(c, c.in(0).dims, c.in(1).dims);
  const bool has_bias = c.has_input(2);
  if (has_bias) {
    c.input_dtype(2, {TDM_F32});
    c.input_shape(2, {g.K});
  }
  c.output(0, TDM_F32, g.y());
  if ((g.C / g.G) * g.R * g.S > 65536) c.fail("C/groups·R·S exceeds 65536, where s32 sums could overflow");
  const double sx = c.float_attr("x_scale", -1);
  const int64_t zx = c.int_attr("x_zero_point");
  if (!(sx > 0) || !std::isfinite(float(sx))) c.fail("x_scale must be given, positive and finite");
  if (zx < 0 || zx > 255) c.fail("x_zero_point " + std::to_string(zx) + " is outside 0..255");
  const std::vector<double> sw = c.floats_attr("w_scale");
  if (sw.size() != 1 && int64_t(sw.size()) != g.K)
    c.fail("w_scale must be given with 1 or K = " + std::to_string(g.K) + " entries");
  for (double v : sw)
    if (!(v > 0) || !std::isfinite(float(v))) c.fail("every w_scale must be positive and finite");
  const std::string act = c.string_attr("activation");
  if (act != "none" && act != "relu") c.fail("activation must be none or relu, got '" + act + "'");
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
