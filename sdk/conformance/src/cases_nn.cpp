// Cases: pooling, activations, softmax and the loss, normalisation,
// embedding, dropout.
#include <algorithm>
#include <cmath>

#include "tandem/conformance/cases.hpp"

namespace tandem::conformance {

namespace {

using Dims = std::vector<int64_t>;

// Saved statistics that match x (inputs 3 and 4 of the norm gradients):
// mean and rstd = 1/sqrt(biased var + 1e-5) over the given split of x.
void fill_stats(std::vector<HostTensor>& in, int64_t outer, int64_t channels, int64_t inner) {
  const HostTensor& x = in[1];
  for (int64_t ch = 0; ch < channels; ++ch) {
    double sum = 0, sq = 0;
    const double count = double(outer * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) sum += x.get((o * channels + ch) * inner + i);
    const double mean = sum / count;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) sq += std::pow(x.get((o * channels + ch) * inner + i) - mean, 2);
    in[3].set(ch, mean);
    in[4].set(ch, 1.0 / std::sqrt(sq / count + 1e-5));
  }
}

void layer_norm_stats(const Case&, std::vector<HostTensor>& in) {
  const int64_t d = in[1].dims().back();
  fill_stats(in, 1, in[1].numel() / d, d);  // one "channel" per row
}

// count_correct: every other row's label becomes the row's first largest
// logit, so the count is not left to chance on long rows.
void half_right(const Case&, std::vector<HostTensor>& in) {
  const int64_t rows = in[1].numel(), cols = in[0].numel() / std::max<int64_t>(rows, 1);
  for (int64_t r = 0; r < rows; r += 2) {
    int64_t best = 0;
    for (int64_t c = 1; c < cols; ++c)
      if (in[0].get(r * cols + c) > in[0].get(r * cols + best)) best = c;
    in[1].set(r, double(best));
  }
}

void batch_norm_stats(const Case&, std::vector<HostTensor>& in) {
  const Dims& x = in[1].dims();
  fill_stats(in, x[0], x[1], in[1].numel() / (x[0] * x[1]));
}

int64_t pool_out(int64_t in, int64_t k, int64_t stride, int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

void add_pool(std::vector<Case>& v) {
  struct P {
    Dims x, kernel, stride, pad;
  };
  const P shapes[] = {
      {{1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0}}, {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1}},
      {{2, 2, 9, 8}, {3, 2}, {1, 1}, {1, 0}}, {{1, 4, 6, 5}, {2, 3}, {1, 2}, {0, 1}},
      {{3, 1, 5, 5}, {5, 5}, {5, 5}, {0, 0}}, {{1, 2, 11, 11}, {3, 3}, {3, 3}, {1, 1}},
  };
  for (tdm_dtype dt : kF32Bf16)
    for (const P& s : shapes) {
      const Dims y{s.x[0], s.x[1], pool_out(s.x[2], s.kernel[0], s.stride[0], s.pad[0]),
                   pool_out(s.x[3], s.kernel[1], s.stride[1], s.pad[1])};
      Attrs a;
      a.ints("kernel", s.kernel).ints("stride", s.stride).ints("padding", s.pad);
      const int64_t taps = s.kernel[0] * s.kernel[1];
      Case mp("max_pool2d", dt);
      mp.attrs = a;
      v.push_back(mp.in(dt, s.x, Fill::no_ties()).out(dt, y));
      Case mg("max_pool2d_grad", dt);
      mg.attrs = a;
      v.push_back(mg.in(dt, y).in(dt, s.x, Fill::no_ties()).out(dt, s.x).acc(taps));
      for (int inc = 0; inc < 2; ++inc) {
        Case ap("avg_pool2d", dt);
        ap.attrs = a;
        ap.attrs.integer("count_include_pad", inc);
        v.push_back(ap.in(dt, s.x).out(dt, y).acc(taps));
        Case ag("avg_pool2d_grad", dt);
        ag.attrs = ap.attrs;
        v.push_back(ag.in(dt, y).out(dt, s.x).acc(taps));
      }
    }
  // stride defaults to the kernel
  Case d("max_pool2d", TDM_F32);
  d.attrs.ints("kernel", {2, 2});
  v.push_back(d.in(TDM_F32, {2, 3, 6, 6}, Fill::no_ties()).out(TDM_F32, {2, 3, 3, 3}));
}

const Dims kEltShapes[] = {{1}, {7}, {3, 5}, {2, 3, 17}, {4, 1, 9, 8}};

// Every activation of the catalog with each of its attribute variants;
// its gradient from x, or from y for one whose gradient op reads the forward
// output (y drawn in (0, 1), inside every such activation's range: tanh,
// sigmoid).
void add_activations(std::vector<Case>& v) {
  for (const catalog::Op& op : catalog::ops()) {
    if (op.section != "activation" || op.is(TDM_OP_GRADIENT)) continue;
    const catalog::Op& grad = *catalog::find(op.grad_ops.at(0));
    const bool from_y = grad.inputs.at(1).name == "y";
    for (const Attrs& attrs : activation_attr_variants(op))
      for (tdm_dtype dt : kF32Bf16F16)
        for (const Dims& s : kEltShapes) {
          Case f(op.name, dt), g(grad.name, dt);
          f.attrs = g.attrs = attrs;
          v.push_back(f.in(dt, s, Fill::range(-4, 4)).out(dt, s));
          v.push_back(
              g.in(dt, s).in(dt, s, from_y ? Fill::range(0.01, 0.99) : Fill::range(-4, 4)).out(dt, s));
        }
  }
}

void add_softmax(std::vector<Case>& v) {
  const std::pair<Dims, int64_t> shapes[] = {{{1, 1}, -1},   {{4, 10}, -1},   {{3, 4, 5}, 1},
                                             {{3, 4, 5}, 0}, {{2, 1000}, -1}, {{5, 3}, -2}};
  for (const auto& [s, axis] : shapes) {
    const int64_t len = s[size_t(axis < 0 ? axis + int64_t(s.size()) : axis)];
    for (const char* op : {"softmax", "log_softmax"}) {
      Case c(op, TDM_F32);
      c.attrs.integer("axis", axis);
      v.push_back(c.in(TDM_F32, s, Fill::range(-5, 5)).out(TDM_F32, s).acc(len));
    }
    Case g("softmax_grad", TDM_F32), lg("log_softmax_grad", TDM_F32);
    g.attrs.integer("axis", axis);
    lg.attrs.integer("axis", axis);
    v.push_back(g.in(TDM_F32, s).in(TDM_F32, s, Fill::range(0, 1)).out(TDM_F32, s).acc(len));
    v.push_back(lg.in(TDM_F32, s).in(TDM_F32, s, Fill::range(-6, 0)).out(TDM_F32, s).acc(len));
  }
  struct L {
    int64_t n, c;
    const char* reduction;
    int64_t ignore;
    double smoothing;
  };
  const L losses[] = {{1, 1, "mean", -100, 0},       {8, 10, "mean", -100, 0}, {7, 5, "sum", -100, 0},
                      {16, 4, "mean", 2, 0},         {9, 6, "sum", 0, 0.1},    {5, 33, "mean", 3, 0.2},
                      {32, 1000, "mean", -100, 0.05}};
  for (const L& l : losses)
    for (const char* op : {"softmax_cross_entropy", "softmax_cross_entropy_grad"}) {
      Case c(op, TDM_F32);
      c.attrs.string("reduction", l.reduction)
          .integer("ignore_index", l.ignore)
          .number("label_smoothing", l.smoothing);
      if (c.op == "softmax_cross_entropy_grad") c.in(TDM_F32, {}, Fill::range(0.5, 2));
      c.in(TDM_F32, {l.n, l.c}, Fill::range(-5, 5)).in(TDM_S32, {l.n}, Fill::ints(0, l.c - 1));
      c.op == "softmax_cross_entropy" ? c.out(TDM_F32, {}) : c.out(TDM_F32, {l.n, l.c});
      v.push_back(c.acc(l.n * l.c));
    }
  // count_correct (SDK 1.12): small integer logits tie often (the first
  // largest wins), labels include -1 and C (never right); distinct logits
  // over a long row, where every label is in range.
  struct Count {
    int64_t n, c;
    Fill logits;
    int64_t label_lo, label_hi;
  };
  const Count counts[] = {{1, 1, Fill::ints(0, 2), 0, 0},         {16, 4, Fill::ints(0, 3), -1, 4},
                          {64, 3, Fill::ints(0, 1), -1, 3},       {9, 7, Fill::no_ties(), 0, 6},
                          {33, 1000, Fill::range(-5, 5), 0, 999}, {4, 50257, Fill::range(-5, 5), 0, 50256}};
  for (const Count& k : counts) {
    Case c("count_correct", TDM_F32);
    c.in(TDM_F32, {k.n, k.c}, k.logits).in(TDM_S32, {k.n}, Fill::ints(k.label_lo, k.label_hi));
    if (k.c > 4) c.fixup = half_right;
    v.push_back(c.out(TDM_F32, {}));
  }
}

void add_norms(std::vector<Case>& v) {
  const Dims ln_shapes[] = {{1, 1}, {4, 16}, {2, 3, 7}, {5, 768}};
  for (tdm_dtype dt : kF32Bf16)
    for (const Dims& s : ln_shapes) {
      const int64_t d = s.back();
      const Dims rows(s.begin(), s.end() - 1);
      for (double eps : {1e-5, 1e-3}) {
        Case c("layer_norm", dt);
        if (eps != 1e-5) c.attrs.number("epsilon", eps);
        c.in(dt, s).in(dt, {d}, Fill::range(0.5, 1.5)).in(dt, {d});
        v.push_back(c.out(dt, s).out(TDM_F32, rows).out(TDM_F32, rows).acc(d));
      }
      Case g("layer_norm_grad", dt);
      g.in(dt, s).in(dt, s).in(dt, {d}, Fill::range(0.5, 1.5)).in(TDM_F32, rows).in(TDM_F32, rows);
      g.fixup = layer_norm_stats;
      const int64_t n_rows = [&] {
        int64_t n = 1;
        for (int64_t r : rows) n *= r;
        return n;
      }();
      v.push_back(g.out(dt, s).out(dt, {d}).out(dt, {d}).acc(std::max(n_rows, d)));
      // With an addend (ABI 1.9): in its own buffer, and dx over it.
      for (int in_place = 0; in_place < 2; ++in_place) {
        Case ga("layer_norm_grad", dt);
        ga.in(dt, s)
            .in(dt, s)
            .in(dt, {d}, Fill::range(0.5, 1.5))
            .in(TDM_F32, rows)
            .in(TDM_F32, rows)
            .in(dt, s);
        ga.fixup = layer_norm_stats;
        ga.out(dt, s).out(dt, {d}).out(dt, {d}).acc(std::max(n_rows, d) + 1);
        v.push_back(in_place ? ga.alias(0, 5) : ga);
      }
    }
  const Dims bn_shapes[] = {{2, 3}, {4, 5, 3, 3}, {1, 2, 7, 5}, {8, 16, 4, 4}, {3, 4, 10}};
  const tdm_dtype f = TDM_F32;
  for (const Dims& s : bn_shapes) {
    const int64_t c = s[1], per = s[0] * (s.size() > 2 ? s[2] : 1) * (s.size() > 3 ? s[3] : 1);
    for (int inplace = 0; inplace < 2; ++inplace) {
      Case t("batch_norm_train", f);
      t.attrs.number("momentum", inplace ? 0.3 : 0.1);
      t.in(f, s).in(f, {c}, Fill::range(0.5, 1.5)).in(f, {c}).in(f, {c}).in(f, {c}, Fill::positive());
      t.out(f, s).out(f, {c}).out(f, {c}).out(f, {c}).out(f, {c}).acc(per);
      if (inplace) t.alias(3, 3).alias(4, 4);
      v.push_back(t);
    }
    Case i("batch_norm_inference", f);
    i.in(f, s).in(f, {c}).in(f, {c}).in(f, {c}).in(f, {c}, Fill::positive());
    v.push_back(i.out(f, s));
    Case g("batch_norm_grad", f);
    g.in(f, s).in(f, s).in(f, {c}, Fill::range(0.5, 1.5)).in(f, {c}).in(f, {c});
    g.fixup = batch_norm_stats;
    v.push_back(g.out(f, s).out(f, {c}).out(f, {c}).acc(per));
  }
}

void add_embedding_dropout(std::vector<Case>& v) {
  struct E {
    int64_t vocab, dim;
    Dims idx;
    int64_t padding;
  };
  const E shapes[] = {{1, 1, {1}, -1}, {10, 4, {7}, -1}, {50, 16, {3, 5}, 3}, {7, 9, {2, 2, 6}, 0}};
  for (const E& e : shapes) {
    Dims y = e.idx;
    y.push_back(e.dim);
    for (tdm_dtype dt : kF32Bf16) {
      Case c("embedding", dt);
      if (e.padding >= 0) c.attrs.integer("padding_idx", e.padding);
      v.push_back(c.in(dt, {e.vocab, e.dim}).in(TDM_S32, e.idx, Fill::ints(0, e.vocab - 1)).out(dt, y));
    }
    Case g("embedding_grad", TDM_F32);
    if (e.padding >= 0) g.attrs.integer("padding_idx", e.padding);
    int64_t n = 1;
    for (int64_t d : e.idx) n *= d;
    g.in(TDM_F32, y).in(TDM_S32, e.idx, Fill::ints(0, e.vocab - 1)).out(TDM_F32, {e.vocab, e.dim});
    v.push_back(g.acc(n));
  }
  // A vocabulary slice: rows [20, 30) of a vocabulary of 50; indices all over it.
  for (tdm_dtype dt : kF32Bf16) {
    Case c("embedding", dt);
    c.attrs.integer("vocab_start", 20).integer("padding_idx", 4);
    v.push_back(c.in(dt, {10, 8}).in(TDM_S32, {4, 6}, Fill::ints(-3, 49)).out(dt, {4, 6, 8}));
  }
  {
    Case g("embedding_grad", TDM_F32);
    g.attrs.integer("vocab_start", 20).integer("padding_idx", 4);
    g.in(TDM_F32, {4, 6, 8}).in(TDM_S32, {4, 6}, Fill::ints(-3, 49)).out(TDM_F32, {10, 8});
    v.push_back(g.acc(24));
  }
  for (tdm_dtype dt : kF32Bf16F16)
    for (const Dims& s : kEltShapes)
      for (double p : {0.0, 0.1, 0.5, 1.0}) {
        Case d("dropout", dt), g("dropout_grad", dt);
        d.attrs.number("p", p).integer("seed", int64_t(s.size()) * 7919 + 12345);
        g.attrs.number("p", p);
        Case with_offset = d;
        v.push_back(d.in(dt, s).none().out(dt, s).out(TDM_U8, s));
        v.push_back(with_offset.in(dt, s).in(TDM_S64, {}, Fill::ints(0, 1 << 20)).out(dt, s).out(TDM_U8, s));
        v.push_back(g.in(dt, s).in(TDM_U8, s, Fill::ints(0, 1)).out(dt, s));
      }
}

}  // namespace

void add_nn_cases(std::vector<Case>& v) {
  add_pool(v);
  add_activations(v);
  add_softmax(v);
  add_norms(v);
  add_embedding_dropout(v);
}

}  // namespace tandem::conformance
