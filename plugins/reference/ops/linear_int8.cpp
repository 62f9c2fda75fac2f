// Reference backend — linear_int8 (sdk/ops.md): u8 x, s8 w, exact s32 sums,
// then act(f32(acc)·f32(x_scale·w_scale[n]) + bias).
//
// Integer arithmetic is exact (s32 accumulators checked against the K bound
// at prepare); the floating steps are the catalog's single f32 operations
// (x / s, (q − z) · s), done in the same type as every other backend so the
// quantized bits agree exactly.
#include <algorithm>
#include <cmath>

#include "common.hpp"

namespace tandem::reference {
namespace {

// ---- linear_int8: y = act(f32(Σ (x − zx)·w) · f32(sx·sw[n]) + bias)
std::unique_ptr<Kernel> linear_int8(const OpView& view, size_t&) {
  Check c(view);
  c.primary_dtype(0, {TDM_U8});
  c.input_dtype(1, {TDM_S8});
  c.input_rank(0, 2);
  c.input_rank(1, 2);
  const int64_t B = c.in(0).dims[0], K = c.in(0).dims[1], N = c.in(1).dims[0];
  c.input_shape(1, {N, K});
  if (K > 65536) c.fail("K = " + std::to_string(K) + " exceeds 65536, where s32 accumulation could overflow");
  const bool has_bias = c.has_input(2);
  if (has_bias) {
    c.input_dtype(2, {TDM_F32});
    c.input_shape(2, {N});
  }
  c.output(0, TDM_F32, {B, N});
  const double sx = c.float_attr("x_scale", -1);
  const int64_t zx = c.int_attr("x_zero_point");
  if (!(sx > 0) || !std::isfinite(float(sx))) c.fail("x_scale must be given, positive and finite");
  if (zx < 0 || zx > 255) c.fail("x_zero_point " + std::to_string(zx) + " is outside 0..255");
  const std::vector<double> sw = c.floats_attr("w_scale");
  if (sw.size() != 1 && int64_t(sw.size()) != N)
    c.fail("w_scale has " + std::to_string(sw.size()) + " entries; expected 1 or N = " + std::to_string(N));
  for (double s : sw)
    if (!(s > 0) || !std::isfinite(float(s))) c.fail("every w_scale must be positive and finite");
  const std::string act = c.string_attr("activation");
  if (act != "none" && act != "relu") c.fail("activation must be none or relu, got '" + act + "'");
  const bool relu = act == "relu";
  std::vector<float> m(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) m[size_t(n)] = float(float(sx) * float(sw[sw.size() == 1 ? 0 : size_t(n)]));
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const auto* x = static_cast<const uint8_t*>(in[0]);
    const auto* w = static_cast<const int8_t*>(in[1]);
    const auto* bias = static_cast<const float*>(in[2]);
    auto* y = static_cast<float*>(out[0]);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t n = 0; n < N; ++n) {
        int32_t acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += (int32_t(x[b * K + k]) - int32_t(zx)) * int32_t(w[n * K + k]);
        float v = float(acc) * m[size_t(n)] + (has_bias ? bias[n] : 0.f);
        if (relu && v < 0) v = 0;
        y[b * N + n] = v;
      }
  });
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("linear_int8", linear_int8); });

}  // namespace

}  // namespace tandem::reference
