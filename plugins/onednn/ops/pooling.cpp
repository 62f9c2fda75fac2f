// oneDNN backend — pooling.
//
// avg_pool2d and its gradient are dnnl pooling primitives
// (pooling_avg_exclude_padding / _include_padding).
// max_pool2d and max_pool2d_grad are own code: the catalog's gradient takes
// (dy, x) with no workspace and wants the FIRST maximum of each window (and a
// NaN to win), which a tie-agnostic oneDNN workspace does not promise. One
// pass over each (n, c) plane, planes in parallel: the gradient kernel finds
// the arg-max again instead of storing indices. The 2x2 stride-2 unpadded
// window (every CNN here) has a fast path with the same semantics: no bounds
// checks, and in the gradient each x element belongs to one window, so dx is
// written once instead of zero-filled and accumulated.
// Native layout (ABI 1.3, layout.hpp): the 2x2 stride-2 f32 max-pool and its
// gradient also read and write nChw<B>c (B = 16 on AVX-512, 8 on AVX2), in
// any mix with plain NCHW (a chain's edge: pool2 -> flatten writes plain from
// a native x). Same semantics, bit for bit: the same first-maximum / NaN-wins
// choice per window, computed lane by lane over the B channels of a block
// (gathered into local arrays,
// decided with masks, no branches), so the compiler vectorises it: 2.8-3.5x
// faster than the plain per-plane kernels, which is why pools are native.
// oneDNN's pooling was not used for it: its workspace does not promise the
// catalog's tie rule, and the gradient has no workspace to read.
#include <algorithm>
#include <cmath>

#include "dnnl_api.hpp"
#include "layout.hpp"

namespace tandem::onednn {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct Pool {
  int64_t n, c, h, w, p, q, kh, kw, sh, sw, ph, pw;
  bool include_pad;
};

// x: [N,C,H,W] image, y: [N,C,P,Q] pooled shape (inputs or outputs per op),
// which the registry has checked against the window (the pooling rule).
Pool geometry(const Check& c, const Dims& x, const Dims& y) {
  const Dims k = c.pair_attr("kernel", {}), s = c.pair_attr("stride", k),
             pad = c.pair_attr("padding", {0, 0});
  const bool include_pad = c.int_attr("count_include_pad", 0) != 0;
  return Pool{x[0], x[1], x[2], x[3], y[2], y[3], k[0], k[1], s[0], s[1], pad[0], pad[1], include_pad};
}

// Flat index (within the plane) of the window's first maximum; a NaN wins.
template <class T>
inline int64_t argmax(const T* plane, const Pool& g, int64_t p, int64_t q) {
  int64_t best_i = -1;
  float best = 0;
  for (int64_t r = 0; r < g.kh; ++r) {
    const int64_t ih = p * g.sh - g.ph + r;
    if (ih < 0 || ih >= g.h) continue;
    for (int64_t s = 0; s < g.kw; ++s) {
      const int64_t iw = q * g.sw - g.pw + s;
      if (iw < 0 || iw >= g.w) continue;
      const float v = ld(plane, ih * g.w + iw);
      if (std::isnan(v)) return ih * g.w + iw;
      if (best_i < 0 || v > best) best = v, best_i = ih * g.w + iw;
    }
  }
  return best_i;
}

bool is_2x2_stride2(const Pool& g) {
  return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0;
}

// Position 0..3 (row-major) of the first maximum of the window whose top
// row starts at r0 and bottom row at r1; a NaN wins (as argmax above).
template <class T>
inline int first_max_2x2(const T* r0, const T* r1) {
  const float v[4] = {ld(r0, 0), ld(r0, 1), ld(r1, 0), ld(r1, 1)};
  int best = 0;
  for (int i = 0; i < 4; ++i) {
    if (std::isnan(v[i])) return i;
    if (v[i] > v[best]) best = i;
  }
  return best;
}

template <class T>
void max_pool_2x2(const Pool& g, const T* x, T* y) {
#pragma omp parallel for schedule(static) if (g.n * g.c * g.h * g.w > kParallelGrain)
  for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
    const T* xp = x + plane * g.h * g.w;
    T* yp = y + plane * g.p * g.q;
    for (int64_t p = 0; p < g.p; ++p) {
      const T* r0 = xp + 2 * p * g.w;
      const T* r1 = r0 + g.w;
      for (int64_t q = 0; q < g.q; ++q) {
        const int i = first_max_2x2(r0 + 2 * q, r1 + 2 * q);
        yp[p * g.q + q] = (i < 2 ? r0 : r1)[2 * q + (i & 1)];
      }
    }
  }
}

template <class T>
void max_pool_2x2_grad(const Pool& g, const T* dy, const T* x, T* dx) {
  const int64_t hw = g.h * g.w;
#pragma omp parallel for schedule(static) if (g.n * g.c * hw > kParallelGrain)
  for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
    const T* xp = x + plane * hw;
    const T* dyp = dy + plane * g.p * g.q;
    T* dxp = dx + plane * hw;
    for (int64_t p = 0; p < g.p; ++p) {
      const T* r0 = xp + 2 * p * g.w;
      T* d0 = dxp + 2 * p * g.w;
      T* d1 = d0 + g.w;
      for (int64_t q = 0; q < g.q; ++q) {
        const int i = first_max_2x2(r0 + 2 * q, r0 + g.w + 2 * q);
        const float v = 0.f + ld(dyp, p * g.q + q);  // 0 + dy: as the accumulating path (-0 -> +0)
        st(d0, 2 * q, i == 0 ? v : 0.f);
        st(d0, 2 * q + 1, i == 1 ? v : 0.f);
        st(d1, 2 * q, i == 2 ? v : 0.f);
        st(d1, 2 * q + 1, i == 3 ? v : 0.f);
      }
      if (g.w % 2 != 0) st(d0, g.w - 1, 0.f), st(d1, g.w - 1, 0.f);  // the column no window covers
    }
    for (int64_t r = 2 * g.p; r < g.h; ++r)  // rows no window covers
      for (int64_t col = 0; col < g.w; ++col) st(dxp, r * g.w + col, 0.f);
  }
}

// Element offsets in a [N,C,H,W] tensor, plain NCHW or native nChw<B>c (C a
// multiple of B, the native block: layout.hpp). `row` is the offset of
// (n, c0, y, 0) for c0 a multiple of B, computed once per row (its divisions
// stay out of the inner loops); from there `lane` steps to the next channel
// of the block, `dw` to the next column and `dh` to the next row. Native
// lanes are contiguous, so the loops over the B lanes below read and write
// whole vectors.
template <bool Native, int B>
struct Image {
  int64_t c, h, w;
  int64_t row(int64_t n, int64_t c0, int64_t y) const {
    if constexpr (Native)
      return ((n * (c / B) + c0 / B) * h + y) * w * B;
    else
      return ((n * c + c0) * h + y) * w;
  }
  int64_t at(int64_t n, int64_t ch, int64_t y, int64_t x) const {
    return row(n, ch / B * B, y) + x * dw() + ch % B * lane();
  }
  int64_t lane() const { return Native ? 1 : h * w; }
  int64_t dw() const { return Native ? B : 1; }
  int64_t dh() const { return Native ? B * w : w; }
};

// first_max_2x2 without branches, so that the loops over lanes vectorise:
// take[k] is all ones where window element k is the one chosen (the first
// NaN, else the first maximum), else zero; `value` is that element. Masks
// rather than bools: the gradient ANDs them into dy's bits (d & 0 is +0.0f,
// exactly what the plain kernel writes), with no select GCC would turn back
// into control flow.
struct Choice {
  uint32_t take[4];
  float value;
};
inline uint32_t mask(bool b) {
  return 0u - uint32_t(b);
}
inline Choice first_max4(float v0, float v1, float v2, float v3) {
  const bool n0 = std::isnan(v0), n1 = std::isnan(v1), n2 = std::isnan(v2), n3 = std::isnan(v3);
  const bool t1 = (!n0) & (n1 | (v1 > v0));
  const float b1 = t1 ? v1 : v0;
  const bool t2 = (!(n0 | n1)) & (n2 | (v2 > b1));
  const float b2 = t2 ? v2 : b1;
  const bool t3 = (!(n0 | n1 | n2)) & (n3 | (v3 > b2));
  return Choice{{mask(!(t1 | t2 | t3)), mask(t1 & !(t2 | t3)), mask(t2 & !t3), mask(t3)}, t3 ? v3 : b2};
}
inline float masked(float f, uint32_t m) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u &= m;
  std::memcpy(&f, &u, 4);
  return f;
}

// Calls body over every (n, channel block of B, output row) in parallel.
template <int B, class Body>
void for_block_rows(const Pool& g, Body&& body) {
  const int64_t blocks = g.c / B, rows = g.n * blocks * g.p;
#pragma omp parallel for schedule(static) if (g.n * g.c * g.h * g.w > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) body(r / (blocks * g.p), r / g.p % blocks * B, r % g.p);
}

// The B lanes of a block at `p` (step `lane`) to and from a local array:
// contiguous for a native tensor, a strided gather/scatter for a plain one.
// The arithmetic then runs on local arrays of B, which GCC vectorises.
template <int B>
inline void gather(const float* p, int64_t lane, float* out) {
  for (int l = 0; l < B; ++l) out[l] = p[l * lane];
}
template <int B>
inline void scatter(const float* in, int64_t lane, float* p) {
  for (int l = 0; l < B; ++l) p[l * lane] = in[l];
}

template <int B, bool XN, bool YN>
void max_pool_2x2_layouts(const Pool& g, const float* x, float* y) {
  const Image<XN, B> xi{g.c, g.h, g.w};
  const Image<YN, B> yi{g.c, g.p, g.q};
  for_block_rows<B>(g, [&](int64_t n, int64_t c0, int64_t p) {
    const float* xr = x + xi.row(n, c0, 2 * p);
    float* yr = y + yi.row(n, c0, p);
    for (int64_t q = 0; q < g.q; ++q) {
      const float* xq = xr + 2 * q * xi.dw();
      float v[4][B], out[B];
      gather<B>(xq, xi.lane(), v[0]);
      gather<B>(xq + xi.dw(), xi.lane(), v[1]);
      gather<B>(xq + xi.dh(), xi.lane(), v[2]);
      gather<B>(xq + xi.dh() + xi.dw(), xi.lane(), v[3]);
      for (int l = 0; l < B; ++l) out[l] = first_max4(v[0][l], v[1][l], v[2][l], v[3][l]).value;
      scatter<B>(out, yi.lane(), yr + q * yi.dw());
    }
  });
}

template <int B, bool DYN, bool XN, bool DXN>
void max_pool_2x2_grad_layouts(const Pool& g, const float* dy, const float* x, float* dx) {
  const Image<DYN, B> dyi{g.c, g.p, g.q};
  const Image<XN, B> xi{g.c, g.h, g.w};
  const Image<DXN, B> dxi{g.c, g.h, g.w};
  for_block_rows<B>(g, [&](int64_t n, int64_t c0, int64_t p) {
    const float* xr = x + xi.row(n, c0, 2 * p);
    const float* dyr = dy + dyi.row(n, c0, p);
    float* dxr = dx + dxi.row(n, c0, 2 * p);
    for (int64_t q = 0; q < g.q; ++q) {
      const float* xq = xr + 2 * q * xi.dw();
      float v[4][B], d[B], out[4][B];
      gather<B>(xq, xi.lane(), v[0]);
      gather<B>(xq + xi.dw(), xi.lane(), v[1]);
      gather<B>(xq + xi.dh(), xi.lane(), v[2]);
      gather<B>(xq + xi.dh() + xi.dw(), xi.lane(), v[3]);
      gather<B>(dyr + q * dyi.dw(), dyi.lane(), d);
      for (int l = 0; l < B; ++l) {
        const Choice m = first_max4(v[0][l], v[1][l], v[2][l], v[3][l]);
        const float value = 0.f + d[l];  // as the plain path (-0 -> +0)
        for (int k = 0; k < 4; ++k) out[k][l] = masked(value, m.take[k]);
      }
      float* o = dxr + 2 * q * dxi.dw();
      scatter<B>(out[0], dxi.lane(), o);
      scatter<B>(out[1], dxi.lane(), o + dxi.dw());
      scatter<B>(out[2], dxi.lane(), o + dxi.dh());
      scatter<B>(out[3], dxi.lane(), o + dxi.dh() + dxi.dw());
    }
  });
  if (g.h % 2 == 0 && g.w % 2 == 0) return;
  for (int64_t n = 0; n < g.n; ++n)  // the last row / column no window covers
    for (int64_t ch = 0; ch < g.c; ++ch)
      for (int64_t r = 0; r < g.h; ++r)
        for (int64_t col = 0; col < g.w; ++col)
          if (r >= 2 * g.p || col >= 2 * g.q) dx[dxi.at(n, ch, r, col)] = 0.f;
}

// Calls f(std::integral_constant<int, B>) for the native block of this CPU.
template <class F>
void with_native_block(F&& f) {
  if (native_block() == 16)
    f(std::integral_constant<int, 16>{});
  else
    f(std::integral_constant<int, 8>{});
}

// Turns three runtime layout flags into template arguments.
template <class F>
void with_layouts(bool a, bool b, bool c, F&& f) {
  const auto pick = [&](auto A) {
    const auto pick_b = [&](auto B) {
      if (c)
        f(A, B, std::true_type{});
      else
        f(A, B, std::false_type{});
    };
    if (b)
      pick_b(std::true_type{});
    else
      pick_b(std::false_type{});
  };
  if (a)
    pick(std::true_type{});
  else
    pick(std::false_type{});
}

bool any_native(const OpView& op) {
  for (size_t i = 0; i < op.inputs().size(); ++i)
    if (op.input_native(i)) return true;
  for (size_t j = 0; j < op.outputs().size(); ++j)
    if (op.output_native(j)) return true;
  return false;
}

std::unique_ptr<Kernel> max_pool2d(const OpView& op, size_t&) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Pool g = geometry(c, c.in(0).dims, c.out(0).dims);
  if (any_native(op)) {  // kernel_layouts offered it: f32, 2x2 stride 2, C % B == 0
    if (!is_2x2_stride2(g)) c.fail("the native layout needs a 2x2 stride-2 unpadded window");
    const bool xn = op.input_native(0), yn = op.output_native(0);
    return make_fn(c, [g, xn, yn](void* const* in, void* const* out, void*) {
      with_native_block([&](auto B) {
        with_layouts(xn, yn, false, [&](auto XN, auto YN, auto) {
          max_pool_2x2_layouts<B(), XN(), YN()>(g, static_cast<const float*>(in[0]),
                                                static_cast<float*>(out[0]));
        });
      });
    });
  }
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [g](void* const* in, void* const* out, void*) {
      const T* x = static_cast<const T*>(in[0]);
      T* y = static_cast<T*>(out[0]);
      if (is_2x2_stride2(g)) return max_pool_2x2(g, x, y);
#pragma omp parallel for schedule(static) if (g.n * g.c * g.h * g.w > kParallelGrain)
      for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
        const T* xp = x + plane * g.h * g.w;
        T* yp = y + plane * g.p * g.q;
        for (int64_t p = 0; p < g.p; ++p)
          for (int64_t q = 0; q < g.q; ++q) yp[p * g.q + q] = xp[argmax(xp, g, p, q)];
      }
    });
  });
}

std::unique_ptr<Kernel> max_pool2d_grad(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Pool g = geometry(c, c.in(1).dims, c.in(0).dims);
  // f32 accumulates straight into dx; bf16 into an f32 copy in the workspace.
  ws = dt == TDM_BF16 ? size_t(numel(c.in(1).dims)) * sizeof(float) : 0;
  if (any_native(op)) {  // kernel_layouts offered it: f32, 2x2 stride 2, C % B == 0
    if (!is_2x2_stride2(g)) c.fail("the native layout needs a 2x2 stride-2 unpadded window");
    const bool dyn = op.input_native(0), xn = op.input_native(1), dxn = op.output_native(0);
    return make_fn(c, [g, dyn, xn, dxn](void* const* in, void* const* out, void*) {
      with_native_block([&](auto B) {
        with_layouts(dyn, xn, dxn, [&](auto DYN, auto XN, auto DXN) {
          max_pool_2x2_grad_layouts<B(), DYN(), XN(), DXN()>(g, static_cast<const float*>(in[0]),
                                                             static_cast<const float*>(in[1]),
                                                             static_cast<float*>(out[0]));
        });
      });
    });
  }
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [g](void* const* in, void* const* out, void* w) {
      const T* dy = static_cast<const T*>(in[0]);
      const T* x = static_cast<const T*>(in[1]);
      T* dx = static_cast<T*>(out[0]);
      if (is_2x2_stride2(g)) return max_pool_2x2_grad(g, dy, x, dx);
      const int64_t hw = g.h * g.w;
#pragma omp parallel for schedule(static) if (g.n * g.c * hw > kParallelGrain)
      for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
        float* acc = std::is_same_v<T, float> ? reinterpret_cast<float*>(dx) + plane * hw
                                              : static_cast<float*>(w) + plane * hw;
        std::fill(acc, acc + hw, 0.f);
        const T* xp = x + plane * hw;
        const T* dyp = dy + plane * g.p * g.q;
        for (int64_t p = 0; p < g.p; ++p)
          for (int64_t q = 0; q < g.q; ++q) acc[argmax(xp, g, p, q)] += ld(dyp, p * g.q + q);
        if constexpr (!std::is_same_v<T, float>)
          for (int64_t i = 0; i < hw; ++i) st(dx + plane * hw, i, acc[i]);
      }
    });
  });
}

memory::desc nchw(const Dims& d, tdm_dtype dt) {
  return memory::desc(to_dnnl(d), dnnl_type(dt), tag::nchw);
}

PoolDescs avg_descs(const Pool& g, tdm_dtype dt) {
  return {nchw({g.n, g.c, g.h, g.w}, dt),
          nchw({g.n, g.c, g.p, g.q}, dt),
          {g.sh, g.sw},
          {g.kh, g.kw},
          {g.ph, g.pw},
          {g.ph, g.pw}};
}

dnnl::pooling_forward::primitive_desc avg_forward_pd(const Pool& g, tdm_dtype dt, dnnl::prop_kind kind) {
  const auto algo = g.include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                  : dnnl::algorithm::pooling_avg_exclude_padding;
  return pooling_forward_pd(kind, algo, avg_descs(g, dt), user_scratchpad_attr());
}

std::unique_ptr<Kernel> avg_pool2d(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Pool g = geometry(c, c.in(0).dims, c.out(0).dims);
  auto k = std::make_unique<PrimKernel>("avg_pool2d");
  const auto pd = avg_forward_pd(g, dt, dnnl::prop_kind::forward_inference);
  k->add<dnnl::pooling_forward>(pd, {{DNNL_ARG_SRC, k->bind(pd.src_desc(), in_slot(0))},
                                     {DNNL_ARG_DST, k->bind(pd.dst_desc(), out_slot(0))}});
  ws = k->workspace_bytes();
  return k;
}

std::unique_ptr<Kernel> avg_pool2d_grad(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Pool g = geometry(c, c.out(0).dims, c.in(0).dims);
  auto k = std::make_unique<PrimKernel>("avg_pool2d_grad");
  const auto hint = avg_forward_pd(g, dt, dnnl::prop_kind::forward_training);
  const auto algo = g.include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                  : dnnl::algorithm::pooling_avg_exclude_padding;
  const auto pd = pooling_backward_pd(algo, avg_descs(g, dt), hint, user_scratchpad_attr());
  k->add<dnnl::pooling_backward>(pd, {{DNNL_ARG_DIFF_DST, k->bind(pd.diff_dst_desc(), in_slot(0))},
                                      {DNNL_ARG_DIFF_SRC, k->bind(pd.diff_src_desc(), out_slot(0))}});
  ws = k->workspace_bytes();
  return k;
}

// Native only for what the layout kernels above cover: the 2x2 stride-2
// unpadded window (native_eligible already demands f32, rank 4, C % B == 0).
bool native_window(const OpView& op) {
  const auto pair = [&](const char* name, std::vector<int64_t> fallback) {
    std::vector<int64_t> v = op.ints_attr(name, std::move(fallback));
    return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
  };
  const std::vector<int64_t> k = pair("kernel", {}), s = pair("stride", k), pad = pair("padding", {0, 0});
  return k == std::vector<int64_t>{2, 2} && s == k && pad == std::vector<int64_t>{0, 0};
}

void max_pool2d_layouts(const OpView& op, const LayoutAnswer& a) {
  if (!native_window(op)) return;
  a.accept(op, 0);
  a.offer(op, 0);
}

void max_pool2d_grad_layouts(const OpView& op, const LayoutAnswer& a) {
  if (!native_window(op)) return;
  a.accept(op, 0);  // dy
  a.accept(op, 1);  // x
  a.offer(op, 0);   // dx
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("max_pool2d", {max_pool2d, max_pool2d_layouts});
  r.add("max_pool2d_grad", {max_pool2d_grad, max_pool2d_grad_layouts});
  r.add("avg_pool2d", avg_pool2d);
  r.add("avg_pool2d_grad", avg_pool2d_grad);
});

}  // namespace

}  // namespace tandem::onednn
