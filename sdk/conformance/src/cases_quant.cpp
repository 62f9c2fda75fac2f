// Cases: INT8 quantization (SDK 1.3) — quantize, dequantize, linear_int8,
// conv2d_int8, fake_quant and its straight-through gradient. Per-tensor and per-channel
// parameters, zero points at 0 and mid-range, saturation, and inputs that
// land exactly on a rounding tie (integers over a scale of 2), where
// round-half-to-even is the only right answer.
#include "tandem/conformance/cases.hpp"

namespace tandem::conformance {

namespace {

using Dims = std::vector<int64_t>;

std::vector<double> scales(int64_t n, double base) {
  std::vector<double> s;
  for (int64_t i = 0; i < n; ++i) s.push_back(base * (1.0 + 0.37 * double(i % 5)));
  return s;
}

std::vector<int64_t> zeros(int64_t n, int64_t base) {
  std::vector<int64_t> z;
  for (int64_t i = 0; i < n; ++i) z.push_back(base + (i % 3) * 7);
  return z;
}

void add_quantize(std::vector<Case>& v) {
  const Fill wide = Fill::range(-4, 4);     // past the range of scale 0.02: saturates
  const Fill ties = Fill::ints(-300, 300);  // x / 2 is a tie for every odd x
  for (tdm_dtype q : {TDM_U8, TDM_S8}) {
    const int64_t mid = q == TDM_U8 ? 128 : 0;
    for (const Dims& s : {Dims{1}, Dims{7}, Dims{3, 5, 2}, Dims{4, 333}}) {
      Case a("quantize", TDM_F32);
      a.attrs.number("scale", 0.02).ints("zero_point", {mid});
      v.push_back(a.in(TDM_F32, s, wide).out(q, s));
      Case t("quantize", TDM_F32);
      t.attrs.number("scale", 2.0).ints("zero_point", {q == TDM_U8 ? 3 : -3});
      v.push_back(t.in(TDM_F32, s, ties).out(q, s));
    }
    // Per channel along axis 1 and along the last axis (-1).
    for (auto [s, axis] : {std::pair<Dims, int64_t>{{3, 5, 2}, 1}, {{6, 4}, -1}, {{2, 3, 4, 4}, 1}}) {
      const int64_t ch = s[size_t(axis < 0 ? int64_t(s.size()) + axis : axis)];
      Case c("quantize", TDM_F32);
      c.attrs.floats("scale", scales(ch, 0.03)).ints("zero_point", zeros(ch, mid)).integer("axis", axis);
      v.push_back(c.in(TDM_F32, s, Fill::range(-5, 5)).out(q, s));
      Case d("dequantize", TDM_F32);
      d.attrs.floats("scale", scales(ch, 0.03)).ints("zero_point", zeros(ch, mid)).integer("axis", axis);
      v.push_back(d.in(q, s, q == TDM_U8 ? Fill::ints(0, 255) : Fill::ints(-128, 127)).out(TDM_F32, s));
    }
    for (const Dims& s : {Dims{1}, Dims{9}, Dims{4, 333}}) {
      Case d("dequantize", TDM_F32);
      d.attrs.number("scale", 0.0173).ints("zero_point", {mid});
      v.push_back(d.in(q, s, q == TDM_U8 ? Fill::ints(0, 255) : Fill::ints(-128, 127)).out(TDM_F32, s));
    }
  }
  Case acc("dequantize", TDM_F32);  // an s32 accumulator
  acc.attrs.number("scale", 1.5e-5);
  v.push_back(acc.in(TDM_S32, {5, 17}, Fill::ints(-3000, 3000)).out(TDM_F32, {5, 17}));
}

// Weights whose pairs of u8·s8 products leave a signed 16-bit lane (x near
// 255, w near ±127: 2·255·127 = 64770 > 32767), and the 7-bit weights
// (|w| <= 64) that `tandem quantize` writes for CPUs without VNNI, where no
// pair can. Kernels that sum pairs in saturating 16-bit lanes (x86 without
// VNNI) must still be exact in the first case, and may take a faster path
// in the second; both are held to the same tolerance as every other case.
void add_int8_pair_extremes(std::vector<Case>& v, const char* op) {
  const bool conv = std::string(op) == "conv2d_int8";
  const Dims x = conv ? Dims{2, 8, 6, 6} : Dims{4, 96};
  const Dims w = conv ? Dims{4, 8, 3, 3} : Dims{12, 96};
  const Dims y = conv ? Dims{2, 4, 4, 4} : Dims{4, 12};
  // A w_scale each, so the three cases' descriptions (and seeds) differ.
  const std::pair<Fill, double> weights[] = {
      {Fill::ints(120, 127), 0.0051}, {Fill::ints(-127, -120), 0.0052}, {Fill::ints(-64, 64), 0.0053}};
  for (const auto& [fill, w_scale] : weights) {
    Case c(op, TDM_U8);
    c.attrs.number("x_scale", 0.0123).integer("x_zero_point", 0).string("activation", "none");
    c.attrs.number("w_scale", w_scale);
    v.push_back(c.in(TDM_U8, x, Fill::ints(250, 255)).in(TDM_S8, w, fill).none().out(TDM_F32, y));
  }
}

void add_linear_int8(std::vector<Case>& v) {
  struct L {
    int64_t b, k, n;
  };
  const L shapes[] = {{1, 1, 1}, {3, 5, 7}, {8, 64, 16}, {5, 300, 33}, {32, 784, 64}};
  for (const L& s : shapes)
    for (int per_channel : {0, 1})
      for (int64_t zp : {0, 128})
        for (const char* act : {"none", "relu"})
          for (int bias : {1, 0}) {
            if (bias == 0 && (zp != 0 || per_channel == 0)) continue;  // one bias-free variant per shape
            Case c("linear_int8", TDM_U8);
            c.attrs.number("x_scale", 0.0123).integer("x_zero_point", zp).string("activation", act);
            if (per_channel)
              c.attrs.floats("w_scale", scales(s.n, 0.004));
            else
              c.attrs.number("w_scale", 0.0051);
            c.in(TDM_U8, {s.b, s.k}, Fill::ints(0, 255)).in(TDM_S8, {s.n, s.k}, Fill::ints(-127, 127));
            if (bias)
              c.in(TDM_F32, {s.n}, Fill::range(-2, 2));
            else
              c.none();
            v.push_back(c.out(TDM_F32, {s.b, s.n}));
          }
  add_int8_pair_extremes(v, "linear_int8");
}

void add_conv2d_int8(std::vector<Case>& v) {
  struct C {
    Dims x;
    int64_t k, r, stride, pad, groups;
  };
  const C shapes[] = {{{1, 1, 5, 5}, 2, 3, 1, 0, 1},
                      {{2, 3, 8, 7}, 4, 3, 1, 1, 1},  // padding: taps outside the image add nothing
                      {{2, 4, 9, 9}, 8, 3, 2, 1, 2},
                      {{3, 16, 12, 12}, 32, 5, 1, 2, 1},
                      {{2, 1, 28, 28}, 8, 5, 1, 2, 1}};
  for (const C& s : shapes)
    for (int64_t zp : {0, 131})
      for (int per_channel : {0, 1}) {
        const int64_t p = (s.x[2] + 2 * s.pad - s.r) / s.stride + 1,
                      q = (s.x[3] + 2 * s.pad - s.r) / s.stride + 1;
        Case c("conv2d_int8", TDM_U8);
        c.attrs.ints("stride", {s.stride, s.stride})
            .ints("padding", {s.pad, s.pad})
            .integer("groups", s.groups);
        c.attrs.number("x_scale", 0.021)
            .integer("x_zero_point", zp)
            .string("activation", zp ? "relu" : "none");
        if (per_channel)
          c.attrs.floats("w_scale", scales(s.k, 0.003));
        else
          c.attrs.number("w_scale", 0.0047);
        c.in(TDM_U8, s.x, Fill::ints(0, 255))
            .in(TDM_S8, {s.k, s.x[1] / s.groups, s.r, s.r}, Fill::ints(-127, 127));
        if (per_channel)
          c.in(TDM_F32, {s.k}, Fill::range(-1, 1));
        else
          c.none();
        v.push_back(c.out(TDM_F32, {s.x[0], s.k, p, q}));
      }
  add_int8_pair_extremes(v, "conv2d_int8");
}

void add_fake_quant(std::vector<Case>& v) {
  struct F {
    Dims s;
    int64_t qmin, qmax, zero;
    int per_channel;
  };
  const F shapes[] = {{{7}, 0, 255, 100, 0},
                      {{4, 33}, -127, 127, 0, 0},
                      {{3, 5, 2}, 0, 255, 17, 1},
                      {{6, 8}, -127, 127, 0, 1},
                      {{2, 3, 4, 4}, -128, 127, 5, 1}};
  for (const F& f : shapes)
    for (const char* op : {"fake_quant", "fake_quant_grad"}) {
      Case c(op, TDM_F32);
      const int64_t ch = f.s.size() > 1 ? f.s[1] : 1;
      if (f.per_channel)
        c.attrs.floats("scale", scales(ch, 0.01)).ints("zero_point", {f.zero});
      else
        c.attrs.number("scale", 0.01).ints("zero_point", {f.zero});
      c.attrs.integer("quant_min", f.qmin).integer("quant_max", f.qmax);
      if (std::string(op) == "fake_quant_grad") c.in(TDM_F32, f.s, Fill::range(-1, 1));
      v.push_back(c.in(TDM_F32, f.s, Fill::range(-3, 3)).out(TDM_F32, f.s));
    }
  // No scale: the grid comes from x (QAT) — asymmetric per tensor, symmetric
  // per channel, and one-signed data whose range must still include 0.
  struct D {
    Dims s;
    int64_t qmin, qmax;
    int per_channel;
    Fill fill;
  };
  const D dynamic[] = {{{5, 9}, 0, 255, 0, Fill::range(-1, 3)},
                       {{4, 6, 3}, -127, 127, 1, Fill::range(-2, 2)},
                       {{300, 200}, 0, 255, 0, Fill::range(0.5, 2)},
                       {{16, 40}, -127, 127, 1, Fill::range(-0.3, 0.1)}};
  for (const D& d : dynamic)
    for (const char* op : {"fake_quant", "fake_quant_grad"}) {
      Case c(op, TDM_F32);
      c.attrs.integer("quant_min", d.qmin).integer("quant_max", d.qmax).integer("per_channel", d.per_channel);
      if (std::string(op) == "fake_quant_grad") c.in(TDM_F32, d.s, Fill::range(-1, 1));
      v.push_back(c.in(TDM_F32, d.s, d.fill).out(TDM_F32, d.s));
    }
}

}  // namespace

void add_quant_cases(std::vector<Case>& v) {
  add_quantize(v);
  add_linear_int8(v);
  add_conv2d_int8(v);
  add_fake_quant(v);
}

}  // namespace tandem::conformance
