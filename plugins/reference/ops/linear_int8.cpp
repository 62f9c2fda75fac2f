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
  const int64_t B = c.in(0).dims[0], K = c.in(0).dims[1], N = c.in(1).dims[0];
  // The shape rule has checked the scales (1 or N of w_scale, positive and
  // finite in f32) and that K <= 65536 keeps the s32 sums exact.
  const bool has_bias = c.has_input(2);
  const double sx = c.float_attr("x_scale", -1);
  const int64_t zx = c.int_attr("x_zero_point");
  const std::vector<double> sw = c.floats_attr("w_scale");
  const bool relu = c.string_attr("activation") == "relu";  // else none (the catalog)
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
