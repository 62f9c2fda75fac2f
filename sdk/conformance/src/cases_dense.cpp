// Cases: matmul, linear and its gradients, conv2d and its gradients.
#include <algorithm>

#include "tandem/conformance/cases.hpp"

namespace tandem::conformance {

namespace {

int64_t conv_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

void add_matmul(std::vector<Case>& v) {
  struct M {
    std::vector<int64_t> batch_a, batch_b;
    int64_t m, k, n;
    int ta, tb;
  };
  const M shapes[] = {
      {{}, {}, 1, 1, 1, 0, 0},         {{}, {}, 7, 13, 5, 0, 0},     {{}, {}, 1, 64, 3, 0, 0},
      {{}, {}, 16, 33, 17, 1, 0},      {{}, {}, 5, 9, 11, 0, 1},     {{}, {}, 6, 10, 4, 1, 1},
      {{3}, {3}, 4, 5, 6, 0, 0},       {{2, 3}, {3}, 3, 7, 2, 0, 1}, {{1}, {4}, 2, 3, 5, 1, 0},
      {{2, 1}, {1, 3}, 3, 4, 2, 0, 0},
  };
  for (tdm_dtype dt : kF32Bf16F16)
    for (const M& s : shapes) {
      Case c("matmul", dt);
      auto a = s.batch_a, b = s.batch_b, y = s.batch_a.size() >= s.batch_b.size() ? s.batch_a : s.batch_b;
      if (s.batch_a.size() == s.batch_b.size())
        for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(s.batch_a[i], s.batch_b[i]);
      a.insert(a.end(),
               s.ta ? std::initializer_list<int64_t>{s.k, s.m} : std::initializer_list<int64_t>{s.m, s.k});
      b.insert(b.end(),
               s.tb ? std::initializer_list<int64_t>{s.n, s.k} : std::initializer_list<int64_t>{s.k, s.n});
      y.push_back(s.m);
      y.push_back(s.n);
      c.in(dt, a).in(dt, b).out(dt, y).acc(s.k);
      if (s.ta) c.attrs.integer("transpose_a", 1);
      if (s.tb) c.attrs.integer("transpose_b", 1);
      v.push_back(c);
    }
}

void add_linear(std::vector<Case>& v) {
  struct L {
    int64_t n, i, o;
  };
  const L shapes[] = {{1, 1, 1}, {1, 17, 9}, {8, 32, 16}, {5, 3, 7}, {13, 64, 33}};
  for (tdm_dtype dt : kF32Bf16F16) {
    for (const L& s : shapes)
      for (int bias = 0; bias < 2; ++bias) {
        Case c("linear", dt);
        c.in(dt, {s.n, s.i}).in(dt, {s.o, s.i});
        bias ? c.in(dt, {s.o}) : c.none();
        v.push_back(c.out(dt, {s.n, s.o}).acc(s.i));
      }
    for (const char* act : {"none", "relu", "tanh", "sigmoid"})
      for (int bias = 0; bias < 2; ++bias) {
        Case c("linear", dt);
        c.in(dt, {6, 11}).in(dt, {9, 11});
        bias ? c.in(dt, {9}) : c.none();
        c.attrs.string("activation", act);
        v.push_back(c.out(dt, {6, 9}).acc(11));
      }
    for (const L& s : shapes) {
      Case gi("linear_grad_input", dt);
      v.push_back(gi.in(dt, {s.n, s.o}).in(dt, {s.o, s.i}).out(dt, {s.n, s.i}).acc(s.o));
      // With an addend (ABI 1.9): in its own buffer, and dx over it.
      for (int in_place = 0; in_place < 2; ++in_place) {
        Case ga("linear_grad_input", dt);
        ga.in(dt, {s.n, s.o}).in(dt, {s.o, s.i}).in(dt, {s.n, s.i}).out(dt, {s.n, s.i}).acc(s.o + 1);
        v.push_back(in_place ? ga.alias(0, 2) : ga);
      }
      for (int bias = 0; bias < 2; ++bias) {
        Case gw("linear_grad_weight", dt);
        gw.in(dt, {s.n, s.o}).in(dt, {s.n, s.i}).out(dt, {s.o, s.i});
        bias ? gw.out(dt, {s.o}) : gw.no_out();
        if (!bias) gw.attrs.integer("has_bias", 0);
        v.push_back(gw.acc(s.n));
      }
    }
  }
  // Wide outputs (ABI 1.11): bf16/f16 operands, f32 results (and bias),
  // held to f32's tolerance, so a result rounded to 16 bits fails.
  for (tdm_dtype dt : {TDM_BF16, TDM_F16})
    for (const L& s : shapes)
      for (int bias = 0; bias < 2; ++bias) {
        Case c("linear", dt);
        c.in(dt, {s.n, s.i}).in(dt, {s.o, s.i});
        bias ? c.in(TDM_F32, {s.o}) : c.none();
        v.push_back(c.out(TDM_F32, {s.n, s.o}).acc(s.i));
        Case gw("linear_grad_weight", dt);
        gw.in(dt, {s.n, s.o}).in(dt, {s.n, s.i}).out(TDM_F32, {s.o, s.i});
        bias ? gw.out(TDM_F32, {s.o}) : gw.no_out();
        if (!bias) gw.attrs.integer("has_bias", 0);
        v.push_back(gw.acc(s.n));
      }
}

struct Conv {
  int64_t n, c, h, w, k, r, s;
  std::vector<int64_t> stride, pad, dil;
  int64_t groups;
};

void add_conv(std::vector<Case>& v) {
  const Conv shapes[] = {
      {1, 1, 5, 5, 1, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1},    // batch 1, one channel
      {2, 3, 7, 6, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},    // "same" padding, odd/non-square image
      {2, 4, 9, 9, 6, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2},    // stride 2, groups 2
      {1, 3, 11, 10, 5, 3, 2, {1, 2}, {2, 0}, {2, 1}, 1},  // dilation, asymmetric kernel/stride/padding
      {3, 6, 5, 5, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 6},    // depthwise
      {2, 8, 4, 4, 16, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},   // 1x1 convolution
      {1, 2, 8, 8, 4, 5, 5, {3, 3}, {2, 2}, {1, 1}, 2},    // large kernel, stride 3
  };
  for (tdm_dtype dt : kF32Bf16F16)
    for (const Conv& g : shapes) {
      const int64_t p = conv_out(g.h, g.r, g.stride[0], g.pad[0], g.dil[0]);
      const int64_t q = conv_out(g.w, g.s, g.stride[1], g.pad[1], g.dil[1]);
      const std::vector<int64_t> x{g.n, g.c, g.h, g.w}, w{g.k, g.c / g.groups, g.r, g.s}, y{g.n, g.k, p, q};
      Attrs a;
      a.ints("stride", g.stride).ints("padding", g.pad).ints("dilation", g.dil).integer("groups", g.groups);
      for (int bias = 0; bias < 2; ++bias) {
        Case c("conv2d", dt);
        c.attrs = a;
        c.in(dt, x).in(dt, w);
        bias ? c.in(dt, {g.k}) : c.none();
        v.push_back(c.out(dt, y).acc(g.c / g.groups * g.r * g.s));
      }
      Case gi("conv2d_grad_input", dt);
      gi.attrs = a;
      v.push_back(gi.in(dt, y).in(dt, w).out(dt, x).acc(g.k / g.groups * g.r * g.s));
      for (int bias = 0; bias < 2; ++bias) {
        Case gw("conv2d_grad_weight", dt);
        gw.attrs = a;
        gw.attrs.integer("has_bias", bias);
        gw.in(dt, y).in(dt, x).out(dt, w);
        bias ? gw.out(dt, {g.k}) : gw.no_out();
        v.push_back(gw.acc(g.n * p * q));
      }
    }
}

}  // namespace

void add_dense_cases(std::vector<Case>& v) {
  add_matmul(v);
  add_linear(v);
  add_conv(v);
}

}  // namespace tandem::conformance
