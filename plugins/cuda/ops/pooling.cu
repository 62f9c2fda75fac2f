// CUDA backend — max_pool2d, avg_pool2d and their gradients, own kernels.
// cuDNN's pooling is not used: the catalog fixes details cuDNN leaves open
// (the first maximum in row-major window order wins and alone gets the
// gradient; a NaN beats any number; padded taps never count for max, and
// for avg only with count_include_pad). Gradients are gathers (one thread
// per input element, looping over the windows that contain it), so they are
// deterministic and need no atomics, for bf16 too.
#include "ops/kernels.cuh"

namespace tandem::cuda {
namespace {

struct Geo {
  int64_t NC, H, W, P, Q, kh, kw, sh, sw, ph, pw;
  bool include_pad;
};

// Flat x index (within the image plane) of window (p,q)'s winner.
template <class T>
__device__ int64_t window_argmax(const T* x, const Geo& g, int64_t p, int64_t q) {
  int64_t best = -1;
  float b = 0.0f;
  for (int64_t r = 0; r < g.kh; ++r)
    for (int64_t s = 0; s < g.kw; ++s) {
      const int64_t h = p * g.sh - g.ph + r, w = q * g.sw - g.pw + s;
      if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
      const float v = ld(x, h * g.W + w);
      if (best < 0) {
        best = h * g.W + w, b = v;
        continue;
      }
      if (isnan(b)) return best;
      if (v > b || isnan(v)) best = h * g.W + w, b = v;
    }
  return best;
}

__device__ float window_divisor(const Geo& g, int64_t p, int64_t q) {
  if (g.include_pad) return static_cast<float>(g.kh * g.kw);
  const int64_t h0 = max(p * g.sh - g.ph, int64_t(0)), h1 = min(p * g.sh - g.ph + g.kh, g.H);
  const int64_t w0 = max(q * g.sw - g.pw, int64_t(0)), w1 = min(q * g.sw - g.pw + g.kw, g.W);
  return static_cast<float>((h1 - h0) * (w1 - w0));
}

template <class T, bool kMax>
__global__ void pool_kernel(const T* x, T* y, Geo g) {
  TDM_GRID_STRIDE(i, g.NC * g.P * g.Q) {
    const int64_t q = i % g.Q, p = (i / g.Q) % g.P, nc = i / (g.P * g.Q);
    const T* plane = x + nc * g.H * g.W;
    if (kMax) {
      st(y, i, ld(plane, window_argmax(plane, g, p, q)));
    } else {
      float sum = 0.0f;
      for (int64_t r = 0; r < g.kh; ++r)
        for (int64_t s = 0; s < g.kw; ++s) {
          const int64_t h = p * g.sh - g.ph + r, w = q * g.sw - g.pw + s;
          if (h >= 0 && h < g.H && w >= 0 && w < g.W) sum += ld(plane, h * g.W + w);
        }
      st(y, i, sum / window_divisor(g, p, q));
    }
  }
}

// x is only read by max (the argmax); avg passes nullptr.
template <class T, bool kMax>
__global__ void pool_grad_kernel(const T* dy, const T* x, T* dx, Geo g) {
  TDM_GRID_STRIDE(i, g.NC * g.H * g.W) {
    const int64_t w = i % g.W, h = (i / g.W) % g.H, nc = i / (g.H * g.W);
    // Windows p with p*sh - ph <= h < p*sh - ph + kh.
    const int64_t p0 = max((h + g.ph - g.kh + g.sh) / g.sh, int64_t(0)), p1 = min((h + g.ph) / g.sh, g.P - 1);
    const int64_t q0 = max((w + g.pw - g.kw + g.sw) / g.sw, int64_t(0)), q1 = min((w + g.pw) / g.sw, g.Q - 1);
    float acc = 0.0f;
    for (int64_t p = p0; p <= p1; ++p)
      for (int64_t q = q0; q <= q1; ++q) {
        const float d = ld(dy, (nc * g.P + p) * g.Q + q);
        if (kMax) {
          if (window_argmax(x + nc * g.H * g.W, g, p, q) == h * g.W + w) acc += d;
        } else {
          acc += d / window_divisor(g, p, q);
        }
      }
    st(dx, i, acc);
  }
}

// The registry has checked the attributes (kernel given, at most half of it
// padded) and that the window fits the NCHW image.
Geo geometry(const Check& c, const Dims& image) {
  const auto k = c.pair_attr("kernel", {}), stride = c.pair_attr("stride", k),
             pad = c.pair_attr("padding", {0, 0});
  Geo g{};
  g.kh = k[0], g.kw = k[1], g.sh = stride[0], g.sw = stride[1], g.ph = pad[0], g.pw = pad[1];
  g.include_pad = c.op().int_attr("count_include_pad", 0) != 0;
  g.NC = image[0] * image[1], g.H = image[2], g.W = image[3];
  const int64_t span_h = g.H + 2 * g.ph - g.kh, span_w = g.W + 2 * g.pw - g.kw;
  g.P = span_h / g.sh + 1, g.Q = span_w / g.sw + 1;
  return g;
}

template <bool kMax>
std::unique_ptr<Kernel> prepare_pool(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kF32Bf16);
  const Dims x = c.in(0).dims;
  const Geo g = geometry(c, x);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
      const int64_t n = g.NC * g.P * g.Q;
      if (n == 0) return;
      pool_kernel<T, kMax>
          <<<grid_for(n), kThreads, 0, s.get()>>>(static_cast<const T*>(in[0]), static_cast<T*>(o[0]), g);
    });
  });
  return k;
}

template <bool kMax>
std::unique_ptr<Kernel> prepare_pool_grad(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kF32Bf16);
  const Dims x = c.out(0).dims;
  const Geo g = geometry(c, x);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
      const int64_t n = g.NC * g.H * g.W;
      if (n == 0) return;
      pool_grad_kernel<T, kMax><<<grid_for(n), kThreads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), kMax ? static_cast<const T*>(in[1]) : nullptr, static_cast<T*>(o[0]),
          g);
    });
  });
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("max_pool2d", prepare_pool<true>);
  r.add("avg_pool2d", prepare_pool<false>);
  r.add("max_pool2d_grad", prepare_pool_grad<true>);
  r.add("avg_pool2d_grad", prepare_pool_grad<false>);
});

}  // namespace

}  // namespace tandem::cuda
