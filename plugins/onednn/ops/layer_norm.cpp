// oneDNN backend — layer_norm and its gradient: own code.
//
// Why not dnnl layer/batch_normalization: oneDNN 2.6 takes f32 scale/shift
// only and returns the variance, while the catalog passes gamma/beta in the
// data dtype and saves rstd; matching that around the primitive costs extra
// conversion passes and a lossy rstd -> variance round trip in backward. These
// loops make one pass per statistic over cache-resident rows/channels,
// vectorised with `omp simd` reductions (double accumulators) and threaded
// over rows; deterministic. Rows run through vector_loops.hpp, compiled for
// the CPU's vector level (bf16 rows widened to f32 first).
#include <omp.h>

#include <algorithm>
#include <tuple>
#include <type_traits>

#include "common.hpp"
#include "row_chunk_sums.hpp"
#include "vector_loops.hpp"

namespace tandem::onednn {

namespace {

// bf16 rows are widened into the thread's part of the workspace, run
// through the f32 loops and rounded back once: one arithmetic for both
// dtypes, compiled for the CPU's vector level (the widened values are
// exact, so the results are those of the f32 expressions rounded to bf16).
// Floats a thread holds: a row of each of 3 operands, gamma and beta.
int64_t bf16_floats_per_thread(int64_t d) {
  return 5 * d;
}
size_t bf16_workspace_bytes(tdm_dtype dt, int64_t d) {
  return dt == TDM_BF16 ? size_t(omp_get_max_threads()) * size_t(bf16_floats_per_thread(d)) * sizeof(float)
                        : 0;
}
void widen(const uint16_t* src, float* dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = ld(src, i);
}
void narrow(const float* src, uint16_t* dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) st(dst, i, src[i]);
}

void layer_norm_rows(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                     float* rstd, int64_t rows, int64_t d, float eps, float*) {
#pragma omp parallel for schedule(static) if (rows * d > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r)
    loops::layer_norm_row(x + r * d, gamma, beta, y + r * d, d, eps, mean + r, rstd + r);
}
void layer_norm_rows(const uint16_t* x, const uint16_t* gamma, const uint16_t* beta, uint16_t* y, float* mean,
                     float* rstd, int64_t rows, int64_t d, float eps, float* ws) {
#pragma omp parallel if (rows * d > kParallelGrain)
  {
    float* xr = ws + omp_get_thread_num() * bf16_floats_per_thread(d);
    float *yr = xr + d, *g = yr + d, *b = g + d;
    widen(gamma, g, d);
    widen(beta, b, d);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      widen(x + r * d, xr, d);
      loops::layer_norm_row(xr, g, b, yr, d, eps, mean + r, rstd + r);
      narrow(yr, y + r * d, d);
    }
  }
}

std::unique_ptr<Kernel> layer_norm(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims& xd = c.in(0).dims;
  const int64_t d = xd.back(), rows = d ? numel(xd) / d : 0;
  const float eps = float(c.float_attr("epsilon", 1e-5));
  ws = bf16_workspace_bytes(dt, d);
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [=](void* const* in, void* const* out, void* workspace) {
      layer_norm_rows(static_cast<const T*>(in[0]), static_cast<const T*>(in[1]),
                      static_cast<const T*>(in[2]), static_cast<T*>(out[0]), static_cast<float*>(out[1]),
                      static_cast<float*>(out[2]), rows, d, eps, static_cast<float*>(workspace));
    });
  });
}

// The rows of one chunk (row_chunk_sums.hpp: dgamma and dbeta are summed
// with dx): dx, and the chunk's partial dgamma (part) and dbeta (part + d),
// from f32 rows (bf16 ones widened by the caller's row source).
template <class Rows>
void grad_chunk(const Rows& row_of, const float* gamma, const float* mean, const float* rstd, int64_t r0,
                int64_t r1, int64_t d, float* part) {
  std::fill(part, part + 2 * d, 0.f);
  for (int64_t r = r0; r < r1; ++r) {
    const auto [dyr, xr, addr, dxr] = row_of(r);
    loops::layer_norm_param_sums(dyr, xr, mean[r], rstd[r], part, part + d, d);  // before dx is written
    loops::layer_norm_grad_row(dyr, xr, gamma, mean[r], rstd[r], addr, dxr, d);
    row_of.done(r);
  }
}

// Rows as they are (f32): dy, x, the addend (null without one), dx.
using GradRow = std::tuple<const float*, const float*, const float*, float*>;
struct F32Rows {
  const float *dy, *x, *addend;
  float* dx;
  int64_t d;
  GradRow operator()(int64_t r) const {
    return {dy + r * d, x + r * d, addend ? addend + r * d : nullptr, dx + r * d};
  }
  void done(int64_t) const {}
};
// bf16 rows widened into one thread's buffers (the addend into dx's, which
// the row then adds in place), dx rounded back when done.
struct Bf16Rows {
  const uint16_t *dy, *x, *addend;
  uint16_t* dx;
  int64_t d;
  float *dyr, *xr, *dxr;
  GradRow operator()(int64_t r) const {
    widen(dy + r * d, dyr, d);
    widen(x + r * d, xr, d);
    if (addend) widen(addend + r * d, dxr, d);
    return {dyr, xr, addend ? dxr : nullptr, dxr};
  }
  void done(int64_t r) const { narrow(dxr, dx + r * d, d); }
};

template <class T>
void layer_norm_backward(const T* dy, const T* x, const T* gamma, const float* mean, const float* rstd,
                         const T* addend, T* dx, T* dgamma, T* dbeta, int64_t rows, int64_t d, float* ws) {
  const RowChunks chunks(rows);
  float* partials = ws;
#pragma omp parallel if (rows * d > kParallelGrain)
  {
    const auto each_chunk = [&](const auto& row_of, const float* g) {
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks.count(); ++c)
        grad_chunk(row_of, g, mean, rstd, chunks.begin(c), chunks.end(c), d, partials + c * 2 * d);
    };
    if constexpr (std::is_same_v<T, float>) {
      each_chunk(F32Rows{dy, x, addend, dx, d}, gamma);
    } else {
      float* own = ws + chunks.partial_floats(2 * d) + omp_get_thread_num() * bf16_floats_per_thread(d);
      float* g = own + 3 * d;
      widen(gamma, g, d);
      each_chunk(Bf16Rows{dy, x, addend, dx, d, own, own + d, own + 2 * d}, g);
    }
    chunks.add_in_order(partials, 2 * d, [&](int64_t i, float sum) {
      if (i < d)
        st(dgamma, i, sum);
      else
        st(dbeta, i - d, sum);
    });
  }
}

std::unique_ptr<Kernel> layer_norm_grad(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims& xd = c.in(0).dims;
  const int64_t d = xd.back(), rows = d ? numel(xd) / d : 0;
  const bool addend = c.has_input(5);  // dx += addend, row by row (it may be dx)
  ws = RowChunks(rows).partial_floats(2 * d) * sizeof(float) + bf16_workspace_bytes(dt, d);
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [=](void* const* in, void* const* out, void* workspace) {
      layer_norm_backward(static_cast<const T*>(in[0]), static_cast<const T*>(in[1]),
                          static_cast<const T*>(in[2]), static_cast<const float*>(in[3]),
                          static_cast<const float*>(in[4]), addend ? static_cast<const T*>(in[5]) : nullptr,
                          static_cast<T*>(out[0]), static_cast<T*>(out[1]), static_cast<T*>(out[2]), rows, d,
                          static_cast<float*>(workspace));
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("layer_norm", layer_norm);
  r.add("layer_norm_grad", layer_norm_grad);
});

}  // namespace

}  // namespace tandem::onednn
