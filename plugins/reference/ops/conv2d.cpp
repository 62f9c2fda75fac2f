// Reference backend — conv2d and its two gradients.
//
// All three ops visit the same set of "taps": every (output position,
// filter position) pair whose input position lies inside the image. Forward
// accumulates x·w into y, grad_input scatters dy·w into dx, grad_weight
// accumulates dy·x into dw; accumulators are double.
#include <cmath>

#include "common.hpp"

namespace tandem::reference {
namespace {

struct ConvGeometry {
  int64_t N, C, H, W;  // input
  int64_t K, R, S;     // filters: w[K, C/G, R, S]
  int64_t P, Q;        // output
  int64_t G;           // groups
  int64_t sh, sw, ph, pw, dh, dw;

  Dims x() const { return {N, C, H, W}; }
  Dims w() const { return {K, C / G, R, S}; }
  Dims y() const { return {N, K, P, Q}; }

  // f(y_index, x_index, w_index) for every tap that reads a real (not
  // padded) input element.
  template <class F>
  void for_each_tap(F&& f) const {
    const int64_t Cg = C / G, Kg = K / G;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q) {
            const int64_t yi = ((n * K + k) * P + p) * Q + q;
            const int64_t group = k / Kg;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t r = 0; r < R; ++r)
                for (int64_t s = 0; s < S; ++s) {
                  const int64_t h = p * sh - ph + r * dh, wpos = q * sw - pw + s * dw;
                  if (h < 0 || h >= H || wpos < 0 || wpos >= W) continue;  // zero padding
                  const int64_t ci = group * Cg + c;
                  f(yi, ((n * C + ci) * H + h) * W + wpos, ((k * Cg + c) * R + r) * S + s);
                }
          }
  }
};

int64_t out_size(int64_t in, int64_t pad, int64_t dil, int64_t k, int64_t stride) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;  // floor division of a non-negative span
}

// Reads attributes and the shapes known for `op`: x_dims is the image shape
// (input or, for grad_input, output), w_dims the filter shape (grad_weight:
// from its output).
ConvGeometry geometry(const Check& c, const Dims& x_dims, const Dims& w_dims) {
  ConvGeometry g{};
  const auto stride = c.pair_attr("stride", {1, 1}), pad = c.pair_attr("padding", {0, 0});
  const auto dil = c.pair_attr("dilation", {1, 1});
  g.G = c.int_attr("groups", 1);
  g.sh = stride[0], g.sw = stride[1], g.ph = pad[0], g.pw = pad[1], g.dh = dil[0], g.dw = dil[1];
  if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.ph < 0 || g.pw < 0 || g.G < 1)
    c.fail("stride and dilation must be >= 1, padding >= 0, groups >= 1");
  if (x_dims.size() != 4) c.fail("image must be NCHW (rank 4), got " + dims_str(x_dims));
  if (w_dims.size() != 4) c.fail("filter must be [K,C/groups,R,S] (rank 4), got " + dims_str(w_dims));
  g.N = x_dims[0], g.C = x_dims[1], g.H = x_dims[2], g.W = x_dims[3];
  g.K = w_dims[0], g.R = w_dims[2], g.S = w_dims[3];
  if (g.C % g.G != 0 || g.K % g.G != 0)
    c.fail("channels C=" + std::to_string(g.C) + " and filters K=" + std::to_string(g.K) +
           " must both be divisible by groups=" + std::to_string(g.G));
  if (w_dims[1] != g.C / g.G)
    c.fail("filter " + dims_str(w_dims) + " must have C/groups=" + std::to_string(g.C / g.G) + " channels");
  g.P = out_size(g.H, g.ph, g.dh, g.R, g.sh);
  g.Q = out_size(g.W, g.pw, g.dw, g.S, g.sw);
  if (g.P < 1 || g.Q < 1) c.fail("the filter does not fit the padded image " + dims_str(x_dims));
  return g;
}

std::unique_ptr<Kernel> conv2d(const OpView& view, size_t&) {
  Check c(view);
  c.counts(2, 3, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  c.input_dtype(1, {dt});
  const ConvGeometry g = geometry(c, c.in(0).dims, c.in(1).dims);
  const bool has_bias = c.has_input(2);
  if (has_bias) {
    c.input_dtype(2, {dt});
    c.input_shape(2, {g.K});
  }
  c.output(0, dt, g.y());
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> x = load<T>(in[0], dt, numel(g.x())), w = load<T>(in[1], dt, numel(g.w()));
      std::vector<double> acc(size_t(numel(g.y())), 0.0);
      g.for_each_tap([&](int64_t yi, int64_t xi, int64_t wi) {
        acc[size_t(yi)] += double(x[size_t(xi)]) * double(w[size_t(wi)]);
      });
      std::vector<T> y(acc.size());
      const std::vector<T> bias = has_bias ? load<T>(in[2], dt, g.K) : std::vector<T>(size_t(g.K), T(0));
      for (size_t i = 0; i < y.size(); ++i)
        y[i] = T(T(acc[i]) + bias[size_t((int64_t(i) / (g.P * g.Q)) % g.K)]);
      store(out[0], dt, y);
    });
  });
}

std::unique_ptr<Kernel> conv2d_grad_input(const OpView& view, size_t&) {
  Check c(view);
  c.counts(2, 2, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  c.input_dtype(1, {dt});
  c.output_dtype(0, {dt});
  const ConvGeometry g = geometry(c, c.out(0).dims, c.in(1).dims);
  c.input_shape(0, g.y());
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> dy = load<T>(in[0], dt, numel(g.y())), w = load<T>(in[1], dt, numel(g.w()));
      std::vector<double> acc(size_t(numel(g.x())), 0.0);
      g.for_each_tap([&](int64_t yi, int64_t xi, int64_t wi) {
        acc[size_t(xi)] += double(dy[size_t(yi)]) * double(w[size_t(wi)]);
      });
      store(out[0], dt, std::vector<T>(acc.begin(), acc.end()));
    });
  });
}

std::unique_ptr<Kernel> conv2d_grad_weight(const OpView& view, size_t&) {
  Check c(view);
  c.counts(2, 2, 1, 2);
  const tdm_dtype dt = c.primary_dtype(0, kFloat);
  c.input_dtype(1, {dt});
  c.output_dtype(0, {dt});
  const ConvGeometry g = geometry(c, c.in(1).dims, c.out(0).dims);
  c.input_shape(0, g.y());
  const bool has_bias = c.int_attr("has_bias", 1) != 0;
  if (has_bias != c.has_output(1))
    c.fail(std::string("has_bias=") + (has_bias ? "1" : "0") + " but output 1 (dbias) is " +
           (c.has_output(1) ? "present" : "absent"));
  if (has_bias) c.output(1, dt, {g.K});
  return make_kernel(c, [=](void* const* in, void* const* out) {
    with_compute_type(dt, [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> dy = load<T>(in[0], dt, numel(g.y())), x = load<T>(in[1], dt, numel(g.x()));
      std::vector<double> acc(size_t(numel(g.w())), 0.0);
      g.for_each_tap([&](int64_t yi, int64_t xi, int64_t wi) {
        acc[size_t(wi)] += double(dy[size_t(yi)]) * double(x[size_t(xi)]);
      });
      store(out[0], dt, std::vector<T>(acc.begin(), acc.end()));
      if (!has_bias) return;
      std::vector<double> db(size_t(g.K), 0.0);
      for (size_t i = 0; i < dy.size(); ++i) db[size_t((int64_t(i) / (g.P * g.Q)) % g.K)] += double(dy[i]);
      store(out[1], dt, std::vector<T>(db.begin(), db.end()));
    });
  });
}

// ---- conv2d_int8 (sdk/ops.md): u8 x, s8 w, exact s32 sums over the real
// taps of (x − x_zero_point)·w (a padded tap is a real 0.0, i.e. the zero
// point, and adds nothing), then act(f32(acc)·f32(x_scale·w_scale[k]) + bias).
std::unique_ptr<Kernel> conv2d_int8(const OpView& view, size_t&) {
  Check c(view);
  c.counts(2, 3, 1, 1);
  c.primary_dtype(0, {TDM_U8});
  c.input_dtype(1, {TDM_S8});
  const ConvGeometry g = geometry(c, c.in(0).dims, c.in(1).dims);
  const bool has_bias = c.has_input(2);
  if (has_bias) {
    c.input_dtype(2, {TDM_F32});
    c.input_shape(2, {g.K});
  }
  c.output(0, TDM_F32, g.y());
  if ((g.C / g.G) * g.R * g.S > 65536) c.fail("C/groups·R·S exceeds 65536, where s32 sums could overflow");
  const double sx = c.float_attr("x_scale", -1);
  const int64_t zx = c.int_attr("x_zero_point", 0);
  if (!(sx > 0) || !std::isfinite(float(sx))) c.fail("x_scale must be given, positive and finite");
  if (zx < 0 || zx > 255) c.fail("x_zero_point " + std::to_string(zx) + " is outside 0..255");
  const tdm_attr* a = c.op().attr("w_scale");
  std::vector<double> sw;
  if (a != nullptr && a->type == TDM_ATTR_FLOATS && a->floats != nullptr)
    sw.assign(a->floats, a->floats + a->count);
  if (a != nullptr && (a->type == TDM_ATTR_FLOAT || a->type == TDM_ATTR_INT))
    sw = {a->type == TDM_ATTR_FLOAT ? a->f : double(a->i)};
  if (sw.size() != 1 && int64_t(sw.size()) != g.K)
    c.fail("w_scale must be given with 1 or K = " + std::to_string(g.K) + " entries");
  for (double v : sw)
    if (!(v > 0) || !std::isfinite(float(v))) c.fail("every w_scale must be positive and finite");
  const std::string act = c.string_attr("activation", "none");
  if (act != "none" && act != "relu") c.fail("activation must be none or relu, got '" + act + "'");
  std::vector<float> m;
  for (int64_t k = 0; k < g.K; ++k) m.push_back(float(sx) * float(sw[sw.size() == 1 ? 0 : size_t(k)]));
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const auto* x = static_cast<const uint8_t*>(in[0]);
    const auto* w = static_cast<const int8_t*>(in[1]);
    const auto* bias = static_cast<const float*>(in[2]);
    std::vector<int32_t> acc(size_t(numel(g.y())), 0);
    g.for_each_tap([&](int64_t yi, int64_t xi, int64_t wi) {
      acc[size_t(yi)] += (int32_t(x[xi]) - int32_t(zx)) * int32_t(w[wi]);
    });
    auto* y = static_cast<float*>(out[0]);
    for (size_t i = 0; i < acc.size(); ++i) {
      const size_t k = size_t((int64_t(i) / (g.P * g.Q)) % g.K);
      float v = float(acc[i]) * m[k] + (has_bias ? bias[k] : 0.f);
      if (act == "relu" && v < 0) v = 0;
      y[i] = v;
    }
  });
}

}  // namespace

void register_conv(const Registrar& add) {
  add("conv2d_int8", conv2d_int8);
  add("conv2d", conv2d);
  add("conv2d_grad_input", conv2d_grad_input);
  add("conv2d_grad_weight", conv2d_grad_weight);
}

}  // namespace tandem::reference
