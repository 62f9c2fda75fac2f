// oneDNN backend — INT8 quantization (sdk/ops.md): linear_int8 on
// dnnl::matmul u8×s8 -> s32 -> f32, and own OpenMP loops for quantize,
// dequantize, fake_quant and fake_quant_grad.
//
// linear_int8: every constant of the op (x's scale and zero point, the
// weights' scales) is an attribute, so the whole primitive — output scales
// f32(sx·sw[n]) per column, the src zero point, bias as a binary post-op,
// relu — is created once here and a launch only binds pointers; on a CPU
// without VNNI a second, doubled variant keeps it exact (int8_pairs.hpp). The bias is a
// post-op and not matmul's bias argument because oneDNN 2.x adds the bias to
// the s32 accumulator *before* the output scale (dst = oscale·(acc + bias)),
// while the catalog adds an f32 bias after it. oneDNN picks its VNNI (or AMX)
// brgemm kernel for u8×s8 on its own where the CPU has one; kernel_describe
// shows which.
//
// quantize / dequantize / fake_quant are single IEEE operations per element
// (x / s, (q − z)·s), written as plain loops so they give the reference's
// bits exactly; oneDNN's reorder would multiply by 1/s instead.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "common.hpp"
#include "cpu_isa.hpp"
#include "int8_pairs.hpp"

namespace tandem::onednn {
namespace {

using dnnl::memory;

std::vector<float> floats_attr(const Check& c, const char* name) {
  const tdm_attr* a = c.op().attr(name);
  if (a == nullptr) c.fail(std::string("attribute '") + name + "' is required");
  if (a->type == TDM_ATTR_FLOAT) return {float(a->f)};
  if (a->type == TDM_ATTR_INT) return {float(a->i)};
  if (a->type != TDM_ATTR_FLOATS || a->floats == nullptr)
    c.fail(std::string("attribute '") + name + "' must be a float or a list of floats");
  std::vector<float> v;
  for (size_t i = 0; i < a->count; ++i) v.push_back(float(a->floats[i]));
  return v;
}

void check_scales(const Check& c, const std::vector<float>& s, const char* name) {
  if (s.empty()) c.fail(std::string("attribute '") + name + "' is empty");
  for (float v : s)
    if (!(v > 0) || !std::isfinite(v)) c.fail(std::string("every ") + name + " must be positive and finite");
}

// Per-channel scale and zero point of each element: channel = (i / inner) % channels.
struct QuantParams {
  std::vector<float> scale;
  std::vector<int32_t> zero;
  int64_t channels = 1, inner = 1;
};

QuantParams quant_params(const Check& c, const Dims& dims, int64_t lo, int64_t hi) {
  QuantParams p;
  p.scale = floats_attr(c, "scale");
  check_scales(c, p.scale, "scale");
  const std::vector<int64_t> z = c.ints_attr("zero_point", {0});
  if (z.size() != 1 && z.size() != p.scale.size())
    c.fail("zero_point has " + std::to_string(z.size()) + " entries but scale has " +
           std::to_string(p.scale.size()));
  for (int64_t v : z)
    if (v < lo || v > hi) c.fail("zero point " + std::to_string(v) + " is outside the quantized range");
  for (size_t i = 0; i < p.scale.size(); ++i) p.zero.push_back(int32_t(z.size() == 1 ? z[0] : z[i]));
  if (p.scale.size() > 1) {
    if (dims.empty()) c.fail("per-channel scales need a tensor of rank >= 1");
    const size_t axis = c.axis(c.int_attr("axis", 1), dims.size(), "axis");
    p.channels = dims[axis];
    if (int64_t(p.scale.size()) != p.channels)
      c.fail("scale has " + std::to_string(p.scale.size()) +
             " entries but dims[axis] = " + std::to_string(p.channels));
    for (size_t d = axis + 1; d < dims.size(); ++d) p.inner *= dims[d];
  }
  return p;
}

// Runs body(lo, hi, scale, zero) over runs of elements that share a channel.
template <class Body>
void for_channels(const QuantParams& p, int64_t n, Body&& body) {
  if (p.channels == 1) {
    body(int64_t(0), n, p.scale[0], p.zero[0]);
    return;
  }
  const int64_t runs = n / p.inner;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t r = 0; r < runs; ++r) {
    const size_t ch = size_t(r % p.channels);
    body(r * p.inner, (r + 1) * p.inner, p.scale[ch], p.zero[ch]);
  }
}

// Round half to even without a libm call: adding and subtracting 1.5·2^23
// leaves v rounded to an integer in the default (nearest-even) mode, exact
// for |v| <= 2^22. The build targets baseline x86-64, where nearbyintf is a
// call per element that cost more than the INT8 matmul beside it; this form
// vectorises with SSE2.
inline float round_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 · 2^23
  return (v + kMagic) - kMagic;
}

// round_half_even(x / s) + z, clamped; NaN -> z (as the reference backend).
// x / s is clamped first to one step beyond the range (then saturating
// anyway), which keeps it within round_even's exact range.
inline int32_t quantize_one(float x, float s, int32_t z, float lo, float hi) {
  const float zf = float(z);
  const float v = std::min(std::max(x / s, lo - zf - 1.f), hi - zf + 1.f);  // NaN stays NaN
  float q = std::min(std::max(round_even(v) + zf, lo), hi);
  q = v != v ? zf : q;
  return int32_t(q);
}

template <class Q>
void quantize_run(const float* x, Q* y, int64_t b, int64_t e, float s, int32_t z, bool whole) {
  const float lo = float(std::numeric_limits<Q>::min()), hi = float(std::numeric_limits<Q>::max());
#pragma omp parallel for simd schedule(static) if (whole && e - b > kParallelGrain)
  for (int64_t i = b; i < e; ++i) y[i] = Q(quantize_one(x[i], s, z, lo, hi));
}

std::unique_ptr<Kernel> quantize(const OpView& op, size_t&) {
  Check c(op);
  c.counts(1, 1, 1, 1);
  c.primary_dtype(0, kF32);
  const tdm_dtype to = c.primary_output_dtype(0, {TDM_U8, TDM_S8});
  c.output(0, to, c.in(0).dims);
  const QuantParams p = quant_params(c, c.in(0).dims, to == TDM_U8 ? 0 : -128, to == TDM_U8 ? 255 : 127);
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
  c.counts(1, 1, 1, 1);
  const tdm_dtype from = c.primary_dtype(0, {TDM_U8, TDM_S8, TDM_S32});
  c.primary_output_dtype(0, kF32);
  c.output(0, TDM_F32, c.in(0).dims);
  const int64_t lo = from == TDM_U8 ? 0 : from == TDM_S8 ? -128 : std::numeric_limits<int32_t>::min();
  const int64_t hi = from == TDM_U8 ? 255 : from == TDM_S8 ? 127 : std::numeric_limits<int32_t>::max();
  const QuantParams p = quant_params(c, c.in(0).dims, lo, hi);
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

// linear_int8 after validation: what both variants (int8_pairs.hpp) share.
struct LinearInt8 {
  int64_t b = 0, k = 0, n = 0;
  bool bias = false, relu = false;
  int64_t zx = 0;
  std::vector<float> m;  // f32(sx·sw[n]): one entry, or one per column
};

// The primitive for x[b, k']·w[n, k']ᵀ with k' = k (direct) or 2k (doubled,
// reading x' and w' that add_doubling writes into the workspace).
std::unique_ptr<PrimKernel> linear_int8_kernel(const LinearInt8& p, bool doubled) {
  dnnl::primitive_attr attr = user_scratchpad_attr();
  attr.set_output_scales(p.m.size() == 1 ? 0 : 1 << 1, p.m);
  if (p.zx != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {int32_t(p.zx)});
  dnnl::post_ops post;
  const memory::desc mbias({1, p.n}, memory::data_type::f32, memory::format_tag::ab);
  if (p.bias) post.append_binary(dnnl::algorithm::binary_add, mbias);
  if (p.relu) post.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  attr.set_post_ops(post);

  const int64_t k = doubled ? 2 * p.k : p.k;
  const memory::desc mx({p.b, k}, memory::data_type::u8, memory::format_tag::ab);
  const memory::desc mw({k, p.n}, memory::data_type::s8, memory::format_tag::ba);  // w[n,k] seen as [k,n]
  const memory::desc my({p.b, p.n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(mx, mw, my), attr, engine());
  auto kernel = std::make_unique<PrimKernel>(doubled ? "linear_int8:doubled" : "linear_int8");
  DoubledOperands operands{in_slot(0), in_slot(1)};
  if (doubled) operands = add_doubling(*kernel, p.b, p.k, p.n, p.k);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, kernel->bind(mx, operands.x)},
                                       {DNNL_ARG_WEIGHTS, kernel->bind(mw, operands.w)},
                                       {DNNL_ARG_DST, kernel->bind(my, out_slot(0))}};
  if (p.bias) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = kernel->bind(mbias, in_slot(2));
  kernel->add<dnnl::matmul>(pd, std::move(args));
  return kernel;
}

std::unique_ptr<Kernel> linear_int8(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 3, 1, 1);
  c.primary_dtype(0, {TDM_U8});
  c.input_dtype(1, {TDM_S8});
  if (c.in(0).rank() != 2 || c.in(1).rank() != 2) c.fail("x and w must be rank 2");
  LinearInt8 p;
  p.b = c.in(0).dims[0], p.k = c.in(0).dims[1], p.n = c.in(1).dims[0];
  c.input_shape(1, {p.n, p.k});
  if (p.k > 65536) c.fail("K = " + std::to_string(p.k) + " exceeds 65536 (s32 accumulation could overflow)");
  p.bias = c.has_input(2);
  if (p.bias) c.input(2, TDM_F32, {p.n});
  c.output(0, TDM_F32, {p.b, p.n});
  const float sx = float(c.float_attr("x_scale", -1));
  p.zx = c.int_attr("x_zero_point", 0);
  if (!(sx > 0) || !std::isfinite(sx)) c.fail("x_scale must be given, positive and finite");
  if (p.zx < 0 || p.zx > 255) c.fail("x_zero_point " + std::to_string(p.zx) + " is outside 0..255");
  const std::vector<float> sw = floats_attr(c, "w_scale");
  check_scales(c, sw, "w_scale");
  if (sw.size() != 1 && int64_t(sw.size()) != p.n)
    c.fail("w_scale has " + std::to_string(sw.size()) + " entries; expected 1 or N = " + std::to_string(p.n));
  const std::string act = c.string_attr("activation", "none");
  if (act != "none" && act != "relu") c.fail("activation must be none or relu, got '" + act + "'");
  p.relu = act == "relu";
  if (p.b * p.n == 0) return make_fn(c, [](void* const*, void* const*, void*) {});
  if (p.k == 0) c.unsupported("an empty reduction dim (K = 0) is not implemented");
  for (float s : sw) p.m.push_back(sx * s);  // f32(sx·sw[n]), one rounding, as the catalog says

  std::unique_ptr<PrimKernel> direct = linear_int8_kernel(p, false);
  if (!cpu_int8_pairs_saturate()) {
    ws = direct->workspace_bytes();
    return direct;
  }
  auto kernel =
      std::make_unique<PairSafeInt8Kernel>(std::move(direct), linear_int8_kernel(p, true), p.n * p.k);
  ws = kernel->workspace_bytes();
  return kernel;
}

// fake_quant and its straight-through gradient, per channel run; the grid
// comes from the attributes or, without `scale`, from x at every launch.
struct FakeQuant {
  QuantParams p;
  float qmin = 0, qmax = 255;
  bool dynamic = false;
};

FakeQuant fake_quant_params(const Check& c) {
  FakeQuant f;
  const int64_t qmin = c.int_attr("quant_min", 0), qmax = c.int_attr("quant_max", 255);
  if (qmin < -128 || qmax > 255 || qmin >= qmax)
    c.fail("need -128 <= quant_min < quant_max <= 255, got " + std::to_string(qmin) + ", " +
           std::to_string(qmax));
  f.qmin = float(qmin);
  f.qmax = float(qmax);
  const Dims& dims = c.in(0).dims;
  if (c.op().attr("scale") != nullptr) {
    f.p = quant_params(c, dims, qmin, qmax);
    return f;
  }
  f.dynamic = true;
  if (c.int_attr("per_channel", 0) != 0) {
    if (dims.empty()) c.fail("per_channel needs a tensor of rank >= 1");
    const size_t axis = c.axis(c.int_attr("axis", 1), dims.size(), "axis");
    f.p.channels = dims[axis];
    for (size_t d = axis + 1; d < dims.size(); ++d) f.p.inner *= dims[d];
  }
  f.p.scale.assign(size_t(f.p.channels), 1.f);
  f.p.zero.assign(size_t(f.p.channels), 0);
  return f;
}

// The grid of each group from the data's range (sdk/ops.md, fake_quant), in
// f32 exactly as the reference computes it. `x` is the fake_quant input.
QuantParams grid_of(const FakeQuant& f, const float* x, int64_t n) {
  if (!f.dynamic) return f.p;
  QuantParams p = f.p;
  const size_t groups = size_t(p.channels);
  std::vector<float> lo(groups, 0.f), hi(groups, 0.f);
  if (groups == 1) {
    float l = 0.f, h = 0.f;
#pragma omp parallel for simd reduction(min : l) reduction(max : h) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const float v = std::isnan(x[i]) ? 0.f : x[i];  // 0 never moves a range that already holds 0
      l = std::min(l, v);
      h = std::max(h, v);
    }
    lo[0] = l;
    hi[0] = h;
  } else {
    for (int64_t r = 0; r < n / p.inner; ++r) {
      const size_t ch = size_t(r % p.channels);
      for (int64_t i = r * p.inner; i < (r + 1) * p.inner; ++i) {
        if (std::isnan(x[i])) continue;
        lo[ch] = std::min(lo[ch], x[i]);
        hi[ch] = std::max(hi[ch], x[i]);
      }
    }
  }
  const int32_t zero = int32_t(std::clamp(0.f, f.qmin, f.qmax));
  for (size_t ch = 0; ch < groups; ++ch) {
    p.scale[ch] = 1.f;
    p.zero[ch] = zero;
    if (f.qmin == -f.qmax) {
      const float sc = std::max(-lo[ch], hi[ch]) / f.qmax;
      if (sc > 0) p.scale[ch] = sc, p.zero[ch] = 0;
    } else {
      const float sc = (hi[ch] - lo[ch]) / (f.qmax - f.qmin);
      if (sc > 0) {
        p.scale[ch] = sc;
        p.zero[ch] =
            int32_t(std::clamp(f.qmin - std::nearbyint(lo[ch] / sc), f.qmin, f.qmax));  // once per group
      }
    }
  }
  return p;
}

std::unique_ptr<Kernel> fake_quant(const OpView& op, size_t&) {
  Check c(op);
  c.counts(1, 1, 1, 1);
  c.primary_dtype(0, kF32);
  c.output(0, TDM_F32, c.in(0).dims);
  const FakeQuant f = fake_quant_params(c);
  const int64_t n = c.in(0).numel();
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const auto* x = static_cast<const float*>(in[0]);
    auto* y = static_cast<float*>(out[0]);
    const QuantParams p = grid_of(f, x, n);
    for_channels(p, n, [&](int64_t b, int64_t e, float s, int32_t z) {
#pragma omp parallel for simd schedule(static) if (p.channels == 1 && e - b > kParallelGrain)
      for (int64_t i = b; i < e; ++i)
        y[i] = std::isnan(x[i]) ? x[i] : float(quantize_one(x[i], s, z, f.qmin, f.qmax) - z) * s;
    });
  });
}

std::unique_ptr<Kernel> fake_quant_grad(const OpView& op, size_t&) {
  Check c(op);
  c.counts(2, 2, 1, 1);
  c.primary_dtype(0, kF32);
  c.input(1, TDM_F32, c.in(0).dims);
  c.output(0, TDM_F32, c.in(0).dims);
  const FakeQuant f = fake_quant_params(c);
  const int64_t n = c.in(0).numel();
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const auto* dy = static_cast<const float*>(in[0]);
    const auto* x = static_cast<const float*>(in[1]);
    auto* dx = static_cast<float*>(out[0]);
    const QuantParams p = grid_of(f, x, n);
    for_channels(p, n, [&](int64_t b, int64_t e, float s, int32_t z) {
#pragma omp parallel for simd schedule(static) if (p.channels == 1 && e - b > kParallelGrain)
      for (int64_t i = b; i < e; ++i) {
        // Clamped one step beyond the range: the comparison outcome is unchanged.
        const float r = std::min(std::max(x[i] / s, f.qmin - float(z) - 1.f), f.qmax - float(z) + 1.f);
        const float v = round_even(r) + float(z);
        dx[i] = v >= f.qmin && v <= f.qmax ? dy[i] : 0.f;
      }
    });
  });
}

}  // namespace

void register_quant(const Registrar& add) {
  add("quantize", quantize);
  add("dequantize", dequantize);
  add("linear_int8", linear_int8);
  add("fake_quant", fake_quant);
  add("fake_quant_grad", fake_quant_grad);
}

}  // namespace tandem::onednn
