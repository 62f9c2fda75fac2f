// oneDNN backend — batch_norm (train, inference) and its gradient: own code.
//
// Why not dnnl batch_normalization: oneDNN 2.6 takes f32 scale/shift only and
// returns the variance, while the catalog saves rstd; matching that around
// the primitive costs extra conversion passes and a lossy rstd -> variance
// round trip in backward. These loops make one pass per statistic over each
// channel, vectorised with `omp simd` reductions (double accumulators) and
// threaded over channels; deterministic.
#include <cmath>

#include "common.hpp"

namespace tandem::onednn {

namespace {

// x is [N, C, S] with S the product of the spatial dims.
struct BN {
  int64_t n, c, s;
  float eps, momentum;
};

// Training's at least 2 values per channel is the shape rule's.
BN bn_shape(const Check& c) {
  c.primary_dtype(0, kF32);
  const Dims& x = c.in(0).dims;
  const BN b{x[0], x[1], x[1] ? numel(x) / (x[0] * x[1]) : 0, float(c.float_attr("epsilon", 1e-5)),
             float(c.float_attr("momentum", 0.1))};
  return b;
}

std::unique_ptr<Kernel> batch_norm_train(const OpView& op, size_t&) {
  Check c(op);
  const BN b = bn_shape(c);
  return make_fn(c, [b](void* const* in, void* const* out, void*) {
    const float* x = static_cast<const float*>(in[0]);
    const float *gamma = static_cast<const float*>(in[1]), *beta = static_cast<const float*>(in[2]);
    const float *rm = static_cast<const float*>(in[3]), *rv = static_cast<const float*>(in[4]);
    float* y = static_cast<float*>(out[0]);
    float *sm = static_cast<float*>(out[1]), *sr = static_cast<float*>(out[2]);
    float *rmo = static_cast<float*>(out[3]), *rvo = static_cast<float*>(out[4]);
    const double m = double(b.n * b.s);
#pragma omp parallel for schedule(static) if (b.n * b.c * b.s > kParallelGrain)
    for (int64_t ch = 0; ch < b.c; ++ch) {
      double sum = 0, sq = 0;
      for (int64_t n = 0; n < b.n; ++n) {
        const float* p = x + (n * b.c + ch) * b.s;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < b.s; ++i) sum += p[i];
      }
      const double mu = sum / m;
      for (int64_t n = 0; n < b.n; ++n) {
        const float* p = x + (n * b.c + ch) * b.s;
#pragma omp simd reduction(+ : sq)
        for (int64_t i = 0; i < b.s; ++i) sq += (p[i] - mu) * (p[i] - mu);
      }
      const double var = sq / m;
      const float mean = float(mu), rstd = float(1.0 / std::sqrt(var + double(b.eps)));
      const float scale = rstd * gamma[ch], shift = beta[ch] - mean * scale;
      for (int64_t n = 0; n < b.n; ++n) {
        const float* p = x + (n * b.c + ch) * b.s;
        float* q = y + (n * b.c + ch) * b.s;
#pragma omp simd
        for (int64_t i = 0; i < b.s; ++i) q[i] = p[i] * scale + shift;
      }
      sm[ch] = mean;
      sr[ch] = rstd;
      const float old_m = rm[ch], old_v = rv[ch];  // read before writing: outputs 3, 4 may alias
      rmo[ch] = float((1.0 - b.momentum) * old_m + double(b.momentum) * mu);
      rvo[ch] = float((1.0 - b.momentum) * old_v + double(b.momentum) * var * m / (m - 1.0));
    }
  });
}

std::unique_ptr<Kernel> batch_norm_inference(const OpView& op, size_t&) {
  Check c(op);
  const BN b = bn_shape(c);
  return make_fn(c, [b](void* const* in, void* const* out, void*) {
    const float* x = static_cast<const float*>(in[0]);
    const float *gamma = static_cast<const float*>(in[1]), *beta = static_cast<const float*>(in[2]);
    const float *mean = static_cast<const float*>(in[3]), *var = static_cast<const float*>(in[4]);
    float* y = static_cast<float*>(out[0]);
#pragma omp parallel for schedule(static) if (b.n * b.c * b.s > kParallelGrain)
    for (int64_t plane = 0; plane < b.n * b.c; ++plane) {
      const int64_t ch = plane % b.c;
      const float rstd = float(1.0 / std::sqrt(double(var[ch]) + double(b.eps)));
      const float scale = rstd * gamma[ch], shift = beta[ch] - mean[ch] * scale;
      const float* p = x + plane * b.s;
      float* q = y + plane * b.s;
#pragma omp simd
      for (int64_t i = 0; i < b.s; ++i) q[i] = p[i] * scale + shift;
    }
  });
}

std::unique_ptr<Kernel> batch_norm_grad(const OpView& op, size_t&) {
  Check c(op);
  const BN b = bn_shape(c);
  return make_fn(c, [b](void* const* in, void* const* out, void*) {
    const float *dy = static_cast<const float*>(in[0]), *x = static_cast<const float*>(in[1]);
    const float *gamma = static_cast<const float*>(in[2]), *mean = static_cast<const float*>(in[3]);
    const float* rstd = static_cast<const float*>(in[4]);
    float *dx = static_cast<float*>(out[0]), *dg = static_cast<float*>(out[1]),
          *db = static_cast<float*>(out[2]);
    const double m = double(b.n * b.s);
#pragma omp parallel for schedule(static) if (b.n * b.c * b.s > kParallelGrain)
    for (int64_t ch = 0; ch < b.c; ++ch) {
      const float mu = mean[ch], rs = rstd[ch];
      double sdy = 0, sdyx = 0;
      for (int64_t n = 0; n < b.n; ++n) {
        const float* g = dy + (n * b.c + ch) * b.s;
        const float* p = x + (n * b.c + ch) * b.s;
#pragma omp simd reduction(+ : sdy, sdyx)
        for (int64_t i = 0; i < b.s; ++i) {
          sdy += g[i];
          sdyx += double(g[i]) * double((p[i] - mu) * rs);
        }
      }
      dg[ch] = float(sdyx);
      db[ch] = float(sdy);
      const float k = gamma[ch] * rs, mdy = float(sdy / m), mdyx = float(sdyx / m);
      for (int64_t n = 0; n < b.n; ++n) {
        const float* g = dy + (n * b.c + ch) * b.s;
        const float* p = x + (n * b.c + ch) * b.s;
        float* q = dx + (n * b.c + ch) * b.s;
#pragma omp simd
        for (int64_t i = 0; i < b.s; ++i) q[i] = k * (g[i] - mdy - (p[i] - mu) * rs * mdyx);
      }
    }
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("batch_norm_train", batch_norm_train);
  r.add("batch_norm_inference", batch_norm_inference);
  r.add("batch_norm_grad", batch_norm_grad);
});

}  // namespace

}  // namespace tandem::onednn
