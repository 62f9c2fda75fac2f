// Reference backend — INT8 quantization: quantize and dequantize (sdk/ops.md).
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

// ---- quantize: f32 -> u8/s8
std::unique_ptr<Kernel> quantize(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const tdm_dtype to = c.primary_output_dtype(0, {TDM_U8, TDM_S8});
  int64_t lo, hi;
  int_range(to, lo, hi);
  const QuantParams p = quant_params(c, c.in(0).dims);
  const int64_t n = c.in(0).numel();
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t ch = p.channel_of(i);
        store_int(out[0], to, i,
                  quantize_one<T>(T(load_double(in[0], dt, i)), T(p.scale[size_t(ch)]), p.zero[size_t(ch)],
                                  lo, hi));
      }
    });
  });
}

// ---- dequantize: u8/s8/s32 -> f32, (q − z) · s in f32
std::unique_ptr<Kernel> dequantize(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype from = c.primary_dtype(0, {TDM_U8, TDM_S8, TDM_S32});
  const tdm_dtype to = c.primary_output_dtype(0, kF32);
  const QuantParams p = quant_params(c, c.in(0).dims);
  const int64_t n = c.in(0).numel();
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(to, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t ch = p.channel_of(i);
        // q − z is exact in T (|q − z| < 2^32 fits double; s32 data in f32
        // rounds only beyond 2^24, which the catalog's single rounding allows).
        const T d = T(load_int(in[0], from, i) - p.zero[size_t(ch)]);
        store_double(out[0], to, i, double(d * T(p.scale[size_t(ch)])));
      }
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("quantize", quantize);
  r.add("dequantize", dequantize);
});

}  // namespace

}  // namespace tandem::reference
