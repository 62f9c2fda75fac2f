// oneDNN backend — quantize and dequantize (sdk/ops.md): own OpenMP loops,
// single IEEE operations per element (x / s, (q − z)·s), written as plain
// loops so they give the reference's bits exactly; oneDNN's reorder would
// multiply by 1/s instead.
#include <limits>
#include <type_traits>

#include "quant_params.hpp"

namespace tandem::onednn {
namespace {

template <class Q>
void quantize_run(const float* x, Q* y, int64_t b, int64_t e, float s, int32_t z, bool whole) {
  const float lo = float(std::numeric_limits<Q>::min()), hi = float(std::numeric_limits<Q>::max());
#pragma omp parallel for simd schedule(static) if (whole && e - b > kParallelGrain)
  for (int64_t i = b; i < e; ++i) y[i] = Q(quantize_one(x[i], s, z, lo, hi));
}

std::unique_ptr<Kernel> quantize(const OpView& op, size_t&) {
  Check c(op);
  c.primary_dtype(0, kF32);
  const tdm_dtype to = c.primary_output_dtype(0, {TDM_U8, TDM_S8});
  const QuantParams p = quant_params(c, c.in(0).dims);
  const int64_t n = c.in(0).numel();
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const auto* x = static_cast<const float*>(in[0]);
    for_channels(p, n, [&](int64_t b, int64_t e, float s, int32_t z) {
      if (to == TDM_U8)
        quantize_run(x, static_cast<uint8_t*>(out[0]), b, e, s, z, p.channels == 1);
      else
        quantize_run(x, static_cast<int8_t*>(out[0]), b, e, s, z, p.channels == 1);
    });
  });
}

template <class Q>
void dequantize_run(const Q* x, float* y, int64_t b, int64_t e, float s, int32_t z, bool whole) {
  // 8-bit data subtracts in 32 bits (vectorises); s32 needs 64 (no overflow).
  using Wide = std::conditional_t<sizeof(Q) == 4, int64_t, int32_t>;
#pragma omp parallel for simd schedule(static) if (whole && e - b > kParallelGrain)
  for (int64_t i = b; i < e; ++i) y[i] = float(Wide(x[i]) - z) * s;
}

std::unique_ptr<Kernel> dequantize(const OpView& op, size_t&) {
  Check c(op);
  const tdm_dtype from = c.primary_dtype(0, {TDM_U8, TDM_S8, TDM_S32});
  c.primary_output_dtype(0, kF32);
  const QuantParams p = quant_params(c, c.in(0).dims);
  const int64_t n = c.in(0).numel();
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    auto* y = static_cast<float*>(out[0]);
    for_channels(p, n, [&](int64_t b, int64_t e, float s, int32_t z) {
      const bool whole = p.channels == 1;
      if (from == TDM_U8)
        dequantize_run(static_cast<const uint8_t*>(in[0]), y, b, e, s, z, whole);
      else if (from == TDM_S8)
        dequantize_run(static_cast<const int8_t*>(in[0]), y, b, e, s, z, whole);
      else
        dequantize_run(static_cast<const int32_t*>(in[0]), y, b, e, s, z, whole);
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("quantize", quantize);
  r.add("dequantize", dequantize);
});

}  // namespace

}  // namespace tandem::onednn
