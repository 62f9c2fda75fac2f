// Reference backend — INT8 quantization: quantize, dequantize, linear_int8,
// and the QAT pair fake_quant / fake_quant_grad (sdk/ops.md), the latter
// with a fixed grid (attributes) or one taken from x at every launch.
//
// Integer arithmetic is exact (s32 accumulators checked against the K bound
// at prepare); the floating steps are the catalog's single f32 operations
// (x / s, (q − z) · s), done in the same type as every other backend so the
// quantized bits agree exactly.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common.hpp"

namespace tandem::reference {
namespace {

// The scale / zero_point / axis attributes shared by the quantization ops,
// expanded to one entry per channel.
struct QuantParams {
  std::vector<double> scale;  // per channel (size 1 for per-tensor)
  std::vector<int64_t> zero;  // same size as scale
  int64_t channels = 1;       // dims[axis], or 1
  int64_t inner = 1;          // product of the dims after axis
  int64_t channel_of(int64_t flat) const { return channels == 1 ? 0 : (flat / inner) % channels; }
};

std::vector<double> floats_attr(const Check& c, const char* name) {
  const tdm_attr* a = c.op().attr(name);
  if (a == nullptr) c.fail(std::string("attribute '") + name + "' is required");
  if (a->type == TDM_ATTR_FLOAT) return {a->f};
  if (a->type == TDM_ATTR_INT) return {double(a->i)};
  if (a->type != TDM_ATTR_FLOATS || a->floats == nullptr)
    c.fail(std::string("attribute '") + name + "' must be a float or a list of floats");
  return std::vector<double>(a->floats, a->floats + a->count);
}

// `lo`, `hi`: the range the zero points must lie in.
QuantParams quant_params(const Check& c, const Dims& dims, int64_t lo, int64_t hi) {
  QuantParams p;
  p.scale = floats_attr(c, "scale");
  p.zero = c.ints_attr("zero_point", {0});
  if (p.scale.empty()) c.fail("attribute 'scale' is empty");
  for (double s : p.scale)
    if (!(s > 0) || !std::isfinite(s) || !std::isfinite(float(s)) || float(s) <= 0)
      c.fail("every scale must be positive and finite in f32, got " + std::to_string(s));
  if (p.zero.size() == 1 && p.scale.size() > 1) p.zero.assign(p.scale.size(), p.zero[0]);
  if (p.zero.size() != p.scale.size())
    c.fail("zero_point has " + std::to_string(p.zero.size()) + " entries but scale has " +
           std::to_string(p.scale.size()));
  for (int64_t z : p.zero)
    if (z < lo || z > hi)
      c.fail("zero point " + std::to_string(z) + " is outside " + std::to_string(lo) + ".." +
             std::to_string(hi));
  if (p.scale.size() > 1) {
    if (dims.empty()) c.fail("per-channel scales need a tensor of rank >= 1");
    const size_t axis = c.axis(c.int_attr("axis", 1), dims.size(), "axis");
    p.channels = dims[axis];
    if (int64_t(p.scale.size()) != p.channels)
      c.fail("scale has " + std::to_string(p.scale.size()) + " entries but dim " + std::to_string(axis) +
             " of " + dims_str(dims) + " is " + std::to_string(p.channels));
    for (size_t d = axis + 1; d < dims.size(); ++d) p.inner *= dims[d];
  }
  return p;
}

void int_range(tdm_dtype dt, int64_t& lo, int64_t& hi) {
  lo = dt == TDM_U8 ? 0 : dt == TDM_S8 ? -128 : std::numeric_limits<int32_t>::min();
  hi = dt == TDM_U8 ? 255 : dt == TDM_S8 ? 127 : std::numeric_limits<int32_t>::max();
}

// round_half_even(x / s) + z clamped to [lo, hi] in the compute type T;
// NaN -> z. The clamp happens in T: beyond 2^24 the sum may round, but it is
// then far outside any 8-bit range and saturates either way.
template <class T>
int64_t quantize_one(T x, T s, int64_t z, int64_t lo, int64_t hi) {
  if (std::isnan(x)) return z;
  const T v = std::nearbyint(x / s) + T(z);
  if (v <= T(lo)) return lo;
  if (v >= T(hi)) return hi;
  return int64_t(v);
}

// ---- quantize: f32 -> u8/s8
std::unique_ptr<Kernel> quantize(const OpView& view, size_t&) {
  Check c(view);
  c.counts(1, 1, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const tdm_dtype to = c.primary_output_dtype(0, {TDM_U8, TDM_S8});
  c.output(0, to, c.in(0).dims);
  int64_t lo, hi;
  int_range(to, lo, hi);
  const QuantParams p = quant_params(c, c.in(0).dims, lo, hi);
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
  c.counts(1, 1, 1, 1);
  const tdm_dtype from = c.primary_dtype(0, {TDM_U8, TDM_S8, TDM_S32});
  const tdm_dtype to = c.primary_output_dtype(0, kF32);
  c.output(0, to, c.in(0).dims);
  int64_t lo, hi;
  int_range(from, lo, hi);
  const QuantParams p = quant_params(c, c.in(0).dims, lo, hi);
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

// ---- linear_int8: y = act(f32(Σ (x − zx)·w) · f32(sx·sw[n]) + bias)
std::unique_ptr<Kernel> linear_int8(const OpView& view, size_t&) {
  Check c(view);
  c.counts(2, 3, 1, 1);
  c.primary_dtype(0, {TDM_U8});
  c.input_dtype(1, {TDM_S8});
  c.input_rank(0, 2);
  c.input_rank(1, 2);
  const int64_t B = c.in(0).dims[0], K = c.in(0).dims[1], N = c.in(1).dims[0];
  c.input_shape(1, {N, K});
  if (K > 65536) c.fail("K = " + std::to_string(K) + " exceeds 65536, where s32 accumulation could overflow");
  const bool has_bias = c.has_input(2);
  if (has_bias) {
    c.input_dtype(2, {TDM_F32});
    c.input_shape(2, {N});
  }
  c.output(0, TDM_F32, {B, N});
  const double sx = c.float_attr("x_scale", -1);
  const int64_t zx = c.int_attr("x_zero_point", 0);
  if (!(sx > 0) || !std::isfinite(float(sx))) c.fail("x_scale must be given, positive and finite");
  if (zx < 0 || zx > 255) c.fail("x_zero_point " + std::to_string(zx) + " is outside 0..255");
  std::vector<double> sw = floats_attr(c, "w_scale");
  if (sw.size() != 1 && int64_t(sw.size()) != N)
    c.fail("w_scale has " + std::to_string(sw.size()) + " entries; expected 1 or N = " + std::to_string(N));
  for (double s : sw)
    if (!(s > 0) || !std::isfinite(float(s))) c.fail("every w_scale must be positive and finite");
  const std::string act = c.string_attr("activation", "none");
  if (act != "none" && act != "relu") c.fail("activation must be none or relu, got '" + act + "'");
  const bool relu = act == "relu";
  std::vector<float> m(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) m[size_t(n)] = float(float(sx) * float(sw[sw.size() == 1 ? 0 : size_t(n)]));
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const auto* x = static_cast<const uint8_t*>(in[0]);
    const auto* w = static_cast<const int8_t*>(in[1]);
    const auto* bias = static_cast<const float*>(in[2]);
    auto* y = static_cast<float*>(out[0]);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t n = 0; n < N; ++n) {
        int32_t acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += (int32_t(x[b * K + k]) - int32_t(zx)) * int32_t(w[n * K + k]);
        float v = float(acc) * m[size_t(n)] + (has_bias ? bias[n] : 0.f);
        if (relu && v < 0) v = 0;
        y[b * N + n] = v;
      }
  });
}

// Shared by fake_quant and its gradient: the clipping range, either from
// the attributes or, without `scale`, from x at every launch (QAT).
struct FakeQuant {
  QuantParams p;
  int64_t qmin = 0, qmax = 255;
  bool dynamic = false;
};

FakeQuant fake_quant_params(const Check& c, const Dims& dims) {
  FakeQuant f;
  f.qmin = c.int_attr("quant_min", 0);
  f.qmax = c.int_attr("quant_max", 255);
  if (f.qmin < -128 || f.qmax > 255 || f.qmin >= f.qmax)
    c.fail("need -128 <= quant_min < quant_max <= 255, got " + std::to_string(f.qmin) + ", " +
           std::to_string(f.qmax));
  if (c.op().attr("scale") != nullptr) {
    f.p = quant_params(c, dims, f.qmin, f.qmax);
    return f;
  }
  f.dynamic = true;
  if (c.int_attr("per_channel", 0) != 0) {
    if (dims.empty()) c.fail("per_channel needs a tensor of rank >= 1");
    const size_t axis = c.axis(c.int_attr("axis", 1), dims.size(), "axis");
    f.p.channels = dims[axis];
    for (size_t d = axis + 1; d < dims.size(); ++d) f.p.inner *= dims[d];
  }
  return f;
}

// The grid of each group from x's own range (sdk/ops.md, fake_quant), in T.
template <class T>
QuantParams grid_of(const FakeQuant& f, const std::vector<T>& x) {
  if (!f.dynamic) return f.p;
  QuantParams p = f.p;
  std::vector<T> lo(size_t(p.channels), T(0)), hi(size_t(p.channels), T(0));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) continue;
    const size_t ch = size_t(p.channel_of(int64_t(i)));
    lo[ch] = std::min(lo[ch], x[i]);
    hi[ch] = std::max(hi[ch], x[i]);
  }
  p.scale.assign(size_t(p.channels), 1.0);
  p.zero.assign(size_t(p.channels), std::clamp<int64_t>(0, f.qmin, f.qmax));
  for (size_t ch = 0; ch < size_t(p.channels); ++ch) {
    if (f.qmin == -f.qmax) {
      const T s = std::max(-lo[ch], hi[ch]) / T(f.qmax);
      if (s > 0) p.scale[ch] = double(s), p.zero[ch] = 0;
    } else {
      const T s = (hi[ch] - lo[ch]) / T(f.qmax - f.qmin);
      if (s > 0) {
        p.scale[ch] = double(s);
        p.zero[ch] = std::clamp<int64_t>(f.qmin - int64_t(std::nearbyint(lo[ch] / s)), f.qmin, f.qmax);
      }
    }
  }
  return p;
}

// ---- fake_quant: y = (clamp(round(x/s) + z, qmin, qmax) − z) · s
std::unique_ptr<Kernel> fake_quant(const OpView& view, size_t&) {
  Check c(view);
  c.counts(1, 1, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  c.output(0, dt, c.in(0).dims);
  const FakeQuant f = fake_quant_params(c, c.in(0).dims);
  const int64_t n = c.in(0).numel();
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> x = load<T>(in[0], dt, n);
      const QuantParams p = grid_of(f, x);
      std::vector<T> y(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const size_t ch = size_t(p.channel_of(i));
        const T s = T(p.scale[ch]);
        const int64_t z = p.zero[ch];
        y[size_t(i)] = std::isnan(x[size_t(i)])
                           ? x[size_t(i)]
                           : T(quantize_one<T>(x[size_t(i)], s, z, f.qmin, f.qmax) - z) * s;
      }
      store(out[0], dt, y);
    });
  });
}

// ---- fake_quant_grad: dx = dy inside the clipping range, else 0
std::unique_ptr<Kernel> fake_quant_grad(const OpView& view, size_t&) {
  Check c(view);
  c.counts(2, 2, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  c.input_dtype(1, {dt});
  c.input_shape(1, c.in(0).dims);
  c.output(0, dt, c.in(0).dims);
  const FakeQuant f = fake_quant_params(c, c.in(0).dims);
  const int64_t n = c.in(0).numel();
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> dy = load<T>(in[0], dt, n), x = load<T>(in[1], dt, n);
      const QuantParams p = grid_of(f, x);
      std::vector<T> dx(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const size_t ch = size_t(p.channel_of(i));
        const T v = std::nearbyint(x[size_t(i)] / T(p.scale[ch])) + T(p.zero[ch]);
        dx[size_t(i)] = v >= T(f.qmin) && v <= T(f.qmax) ? dy[size_t(i)] : T(0);
      }
      store(out[0], dt, dx);
    });
  });
}

}  // namespace

void register_quantize(const Registrar& add) {
  add("quantize", quantize);
  add("dequantize", dequantize);
  add("linear_int8", linear_int8);
  add("fake_quant", fake_quant);
  add("fake_quant_grad", fake_quant_grad);
}

}  // namespace tandem::reference
