// oneDNN backend — layer_norm and its gradient: own code.
//
// Why not dnnl layer/batch_normalization: oneDNN 2.6 takes f32 scale/shift
// only and returns the variance, while the catalog passes gamma/beta in the
// data dtype and saves rstd; matching that around the primitive costs extra
// conversion passes and a lossy rstd -> variance round trip in backward. These
// loops make one pass per statistic over cache-resident rows/channels,
// vectorised with `omp simd` reductions (double accumulators) and threaded
// over rows; deterministic. f32 rows run through vector_loops.hpp, compiled
// for the CPU's vector level.
#include <cmath>

#include "common.hpp"
#include "vector_loops.hpp"

namespace tandem::onednn {

namespace {

// One row in bf16: the f32 rows run through loops::layer_norm_row, the same
// arithmetic compiled for the CPU's vector level.
void layer_norm_row(const uint16_t* xr, const uint16_t* gamma, const uint16_t* beta, uint16_t* yr, int64_t d,
                    float eps, float* mean, float* rstd) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < d; ++i) sum += ld(xr, i);
  const double mu = sum / double(d);
  double sq = 0;
#pragma omp simd reduction(+ : sq)
  for (int64_t i = 0; i < d; ++i) {
    const double c = ld(xr, i) - mu;
    sq += c * c;
  }
  const double rs = 1.0 / std::sqrt(sq / double(d) + double(eps));
  const float m = float(mu), s = float(rs);
#pragma omp simd
  for (int64_t i = 0; i < d; ++i) st(yr, i, (ld(xr, i) - m) * s * ld(gamma, i) + ld(beta, i));
  *mean = m;
  *rstd = s;
}
void layer_norm_row(const float* xr, const float* gamma, const float* beta, float* yr, int64_t d, float eps,
                    float* mean, float* rstd) {
  loops::layer_norm_row(xr, gamma, beta, yr, d, eps, mean, rstd);
}

template <class T>
void layer_norm_rows(const T* x, const T* gamma, const T* beta, T* y, float* mean, float* rstd, int64_t rows,
                     int64_t d, float eps) {
#pragma omp parallel for schedule(static) if (rows * d > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r)
    layer_norm_row(x + r * d, gamma, beta, y + r * d, d, eps, mean + r, rstd + r);
}

std::unique_ptr<Kernel> layer_norm(const OpView& op, size_t&) {
  Check c(op);
  c.counts(3, 3, 3, 3);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  if (c.in(0).rank() == 0) c.fail("x must have rank >= 1");
  const Dims& xd = c.in(0).dims;
  const int64_t d = xd.back(), rows = d ? numel(xd) / d : 0;
  c.input(1, dt, {d});
  c.input(2, dt, {d});
  const Dims stat(xd.begin(), xd.end() - 1);
  c.output(0, dt, xd);
  c.output(1, TDM_F32, stat);
  c.output(2, TDM_F32, stat);
  const float eps = float(c.float_attr("epsilon", 1e-5));
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [=](void* const* in, void* const* out, void*) {
      layer_norm_rows(static_cast<const T*>(in[0]), static_cast<const T*>(in[1]),
                      static_cast<const T*>(in[2]), static_cast<T*>(out[0]), static_cast<float*>(out[1]),
                      static_cast<float*>(out[2]), rows, d, eps);
    });
  });
}

// One row's dx in bf16; f32 rows run through loops::layer_norm_grad_row.
void layer_norm_grad_row(const uint16_t* dyr, const uint16_t* xr, const uint16_t* gamma, float m, float s,
                         uint16_t* dxr, int64_t d) {
  double sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
  for (int64_t i = 0; i < d; ++i) {
    const float g = ld(dyr, i) * ld(gamma, i);
    sg += g;
    sgx += double(g) * double((ld(xr, i) - m) * s);
  }
  const float mg = float(sg / double(d)), mgx = float(sgx / double(d));
#pragma omp simd
  for (int64_t i = 0; i < d; ++i) {
    const float xh = (ld(xr, i) - m) * s;
    st(dxr, i, s * (ld(dyr, i) * ld(gamma, i) - mg - xh * mgx));
  }
}
void layer_norm_grad_row(const float* dyr, const float* xr, const float* gamma, float m, float s, float* dxr,
                         int64_t d) {
  loops::layer_norm_grad_row(dyr, xr, gamma, m, s, dxr, d);
}

template <class T>
void layer_norm_backward(const T* dy, const T* x, const T* gamma, const float* mean, const float* rstd, T* dx,
                         T* dgamma, T* dbeta, int64_t rows, int64_t d) {
#pragma omp parallel for schedule(static) if (rows * d > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r)
    layer_norm_grad_row(dy + r * d, x + r * d, gamma, mean[r], rstd[r], dx + r * d, d);
  // dgamma/dbeta: column blocks in parallel, rows in order (deterministic).
  // Blocks of 32 columns whose sums stay in registers, and enough of them to
  // keep both threads busy at a transformer's widths (192 = 6 blocks).
  constexpr int64_t kBlock = 32;
  const int64_t blocks = (d + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (rows * d > kParallelGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = b * kBlock, width = std::min(kBlock, d - lo);
    float ag[kBlock] = {}, ab[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float m = mean[r], s = rstd[r];
      const T* dyr = dy + r * d + lo;
      const T* xr = x + r * d + lo;
      if (width == kBlock) {
#pragma omp simd
        for (int64_t i = 0; i < kBlock; ++i) {
          const float g = ld(dyr, i);
          ag[i] += g * (ld(xr, i) - m) * s;
          ab[i] += g;
        }
      } else {
        for (int64_t i = 0; i < width; ++i) {
          const float g = ld(dyr, i);
          ag[i] += g * (ld(xr, i) - m) * s;
          ab[i] += g;
        }
      }
    }
    for (int64_t i = 0; i < width; ++i) {
      st(dgamma, lo + i, ag[i]);
      st(dbeta, lo + i, ab[i]);
    }
  }
}

std::unique_ptr<Kernel> layer_norm_grad(const OpView& op, size_t&) {
  Check c(op);
  c.counts(5, 5, 3, 3);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  if (c.in(0).rank() == 0) c.fail("dy must have rank >= 1");
  const Dims& xd = c.in(0).dims;
  const int64_t d = xd.back(), rows = d ? numel(xd) / d : 0;
  const Dims stat(xd.begin(), xd.end() - 1);
  c.input(1, dt, xd);
  c.input(2, dt, {d});
  c.input(3, TDM_F32, stat);
  c.input(4, TDM_F32, stat);
  c.output(0, dt, xd);
  c.output(1, dt, {d});
  c.output(2, dt, {d});
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [=](void* const* in, void* const* out, void*) {
      layer_norm_backward(static_cast<const T*>(in[0]), static_cast<const T*>(in[1]),
                          static_cast<const T*>(in[2]), static_cast<const float*>(in[3]),
                          static_cast<const float*>(in[4]), static_cast<T*>(out[0]), static_cast<T*>(out[1]),
                          static_cast<T*>(out[2]), rows, d);
    });
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("layer_norm", layer_norm);
  r.add("layer_norm_grad", layer_norm_grad);
});

}  // namespace

}  // namespace tandem::onednn
