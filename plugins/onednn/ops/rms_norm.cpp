// oneDNN backend — rms_norm and its gradient: own code (oneDNN 2.x's layer
// normalisation always centres). Rows in parallel, each row's sums in
// `omp simd` reductions with f32 accumulators, as the catalog allows;
// dgamma in the gradient's row pass (row_chunk_sums.hpp).
#include <algorithm>
#include <cmath>

#include "common.hpp"
#include "row_chunk_sums.hpp"

namespace tandem::onednn {

namespace {

struct Rows {
  int64_t rows = 0, d = 0;
};

// Input x_slot, of rank >= 1, as rows of its last dim.
Rows rows_of(const Check& c, size_t x_slot) {
  const Dims& shape = c.in(x_slot).dims;
  const int64_t d = shape.back();
  return {d ? numel(shape) / d : 0, d};
}

std::unique_ptr<Kernel> rms_norm(const OpView& op, size_t&) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Rows r = rows_of(c, 0);
  const float eps = float(c.float_attr("epsilon"));
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [=](void* const* in, void* const* out, void*) {
      const T* x = static_cast<const T*>(in[0]);
      const T* gamma = static_cast<const T*>(in[1]);
      T* y = static_cast<T*>(out[0]);
      float* rstd = static_cast<float*>(out[1]);
#pragma omp parallel for schedule(static) if (r.rows * r.d > kParallelGrain)
      for (int64_t row = 0; row < r.rows; ++row) {
        const int64_t base = row * r.d;
        float sq = 0;
#pragma omp simd reduction(+ : sq)
        for (int64_t i = 0; i < r.d; ++i) sq += ld(x, base + i) * ld(x, base + i);
        const float rs = 1.f / std::sqrt(sq / float(r.d) + eps);
#pragma omp simd
        for (int64_t i = 0; i < r.d; ++i) st(y, base + i, ld(x, base + i) * rs * ld(gamma, i));
        rstd[row] = rs;
      }
    });
  });
}

// dx per row; dgamma = Σ_rows dy·x·rstd summed in the same pass, a partial
// per chunk of rows (row_chunk_sums.hpp), so it is the same bits on any
// number of threads.
std::unique_ptr<Kernel> rms_norm_grad(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Rows r = rows_of(c, 0);
  const Dims shape = c.in(0).dims;
  const bool has_addend = c.has_input(4);  // dx += addend (it may be dx)
  const RowChunks chunks(r.rows);
  ws = chunks.partial_floats(r.d) * sizeof(float);
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [=](void* const* in, void* const* out, void* workspace) {
      const T* dy = static_cast<const T*>(in[0]);
      const T* x = static_cast<const T*>(in[1]);
      const T* gamma = static_cast<const T*>(in[2]);
      const float* rstd = static_cast<const float*>(in[3]);
      const T* addend = has_addend ? static_cast<const T*>(in[4]) : nullptr;
      T* dx = static_cast<T*>(out[0]);
      T* dgamma = static_cast<T*>(out[1]);
      float* partials = static_cast<float*>(workspace);
#pragma omp parallel if (r.rows * r.d > kParallelGrain)
      {
#pragma omp for schedule(static)
        for (int64_t chunk = 0; chunk < chunks.count(); ++chunk) {
          float* part = partials + chunk * r.d;
          std::fill(part, part + r.d, 0.f);
          for (int64_t row = chunks.begin(chunk); row < chunks.end(chunk); ++row) {
            const int64_t base = row * r.d;
            const float rs = rstd[row];
            float mean_gx = 0;
#pragma omp simd reduction(+ : mean_gx)
            for (int64_t i = 0; i < r.d; ++i) {
              const float xr = ld(x, base + i) * rs;
              mean_gx += ld(dy, base + i) * ld(gamma, i) * xr;
              part[i] += ld(dy, base + i) * xr;  // before dx, which may be dy's memory, is written
            }
            mean_gx /= float(r.d);
            if (addend == nullptr) {
#pragma omp simd
              for (int64_t i = 0; i < r.d; ++i)
                st(dx, base + i, rs * (ld(dy, base + i) * ld(gamma, i) - ld(x, base + i) * rs * mean_gx));
            } else {
#pragma omp simd
              for (int64_t i = 0; i < r.d; ++i)
                st(dx, base + i,
                   rs * (ld(dy, base + i) * ld(gamma, i) - ld(x, base + i) * rs * mean_gx) +
                       ld(addend, base + i));
            }
          }
        }
        chunks.add_in_order(partials, r.d, [&](int64_t i, float sum) { st(dgamma, i, sum); });
      }
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("rms_norm", rms_norm);
  r.add("rms_norm_grad", rms_norm_grad);
});

}  // namespace

}  // namespace tandem::onednn
