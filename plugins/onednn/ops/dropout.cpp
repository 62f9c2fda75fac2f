// oneDNN backend — dropout and its gradient: own code. The mask is the
// catalog's counter-based hash (sdk/ops.md, dropout), so it is bit-identical
// to reference whatever the thread layout. The forward draws it a chunk at
// a time through loops::dropout_factors, compiled per vector level (the
// 64-bit products of the hash vectorise on AVX2 and AVX-512, not as
// baseline code).
#include "common.hpp"
#include "vector_loops.hpp"

namespace tandem::onednn {

namespace {

// Elements a task draws at once (its factors on the stack).
constexpr int64_t kMaskChunk = 4096;

std::unique_ptr<Kernel> dropout(const OpView& op, size_t&) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims shape = c.in(0).dims;
  const bool has_offset = c.has_input(1);
  const double p = c.float_attr("p");
  const uint64_t base = static_cast<uint64_t>(c.int_attr("seed"));
  const int64_t n = numel(shape);
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [=](void* const* in, void* const* out, void*) {
      const uint64_t seed = base + (has_offset ? uint64_t(*static_cast<const int64_t*>(in[1])) : 0);
      const T* x = static_cast<const T*>(in[0]);
      T* y = static_cast<T*>(out[0]);
      uint8_t* mask = static_cast<uint8_t*>(out[1]);
      const float scale = float(1.0 - p);
      over_chunks(n, kMaskChunk, [&](int64_t c0, int64_t len) {
        float factor[kMaskChunk];
        loops::dropout_factors(seed, uint64_t(c0), p, len, factor);
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) {
          // Divided before the choice: `keep ? x / scale : 0` compiled to a
          // branch around a scalar division.
          const float kept = ld(x, c0 + j) / scale;
          st(y, c0 + j, factor[j] != 0.f ? kept : 0.f);
          mask[c0 + j] = factor[j] != 0.f;
        }
      });
    });
  });
}

std::unique_ptr<Kernel> dropout_grad(const OpView& op, size_t&) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims shape = c.in(0).dims;
  const float scale = float(1.0 - c.float_attr("p"));
  const int64_t n = numel(shape);
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [=](void* const* in, void* const* out, void*) {
      const T* dy = static_cast<const T*>(in[0]);
      const uint8_t* mask = static_cast<const uint8_t*>(in[1]);
      T* dx = static_cast<T*>(out[0]);
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        const float kept = ld(dy, i) / scale;  // before the choice, as in the forward
        st(dx, i, mask[i] != 0 ? kept : 0.f);
      }
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("dropout", dropout);
  r.add("dropout_grad", dropout_grad);
});

}  // namespace

}  // namespace tandem::onednn
