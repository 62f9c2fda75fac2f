// Cases: elementwise arithmetic with broadcasting, scale, reductions, shape
// ops (reshape, transpose, concat), cast, fill, copy, optimizer updates.
#include <algorithm>
#include <tuple>

#include "tandem/conformance/cases.hpp"

namespace tandem::conformance {

namespace {

using Dims = std::vector<int64_t>;

Dims broadcast(const Dims& a, const Dims& b) {
  Dims y(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < y.size(); ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1, db = i < b.size() ? b[b.size() - 1 - i] : 1;
    y[y.size() - 1 - i] = da == 1 ? db : da;
  }
  return y;
}

// A value range every dtype holds, so drawing never saturates on input.
Fill fill_for(tdm_dtype dt) {
  switch (dt) {
    case TDM_S8:
      return Fill::ints(-128, 127);
    case TDM_U8:
      return Fill::ints(0, 255);
    case TDM_S32:
    case TDM_S64:
      return Fill::ints(-3000, 3000);  // past 2048: f16 rounds, bf16 beyond 256
    default:
      return Fill::range(-150, 300);  // past the s8/u8 range: casts saturate
  }
}

void add_elementwise(std::vector<Case>& v) {
  const std::pair<Dims, Dims> shapes[] = {
      {{3, 4}, {3, 4}}, {{1}, {1}},   {{3, 4}, {4}},          {{2, 1, 5}, {3, 1}},
      {{1}, {6, 7}},    {{}, {2, 3}}, {{4, 1, 3}, {1, 5, 1}}, {{2, 3, 17}, {2, 3, 17}},
  };
  for (tdm_dtype dt : {TDM_F32, TDM_BF16, TDM_F16, TDM_S32})
    for (const char* op : {"add", "sub", "mul"})
      for (const auto& [a, b] : shapes) {
        Case c(op, dt);
        const Fill f = dt == TDM_S32 ? Fill::ints(-1000, 1000) : Fill::range(-2, 2);
        v.push_back(c.in(dt, a, f).in(dt, b, f).out(dt, broadcast(a, b)));
      }
  // In place (the catalog allows y over an operand of y's shape; the host's
  // memory plan writes sums into a dead operand): y over a, over b, and over
  // b while a broadcasts.
  const std::tuple<Dims, Dims, size_t> aliased[] = {{{3, 4}, {3, 4}, 0},
                                                    {{3, 4}, {4}, 0},
                                                    {{1}, {6, 7}, 1},
                                                    {{2, 3, 17}, {2, 3, 17}, 1},
                                                    {{64, 33}, {64, 33}, 1}};
  for (tdm_dtype dt : {TDM_F32, TDM_BF16, TDM_F16, TDM_S32})
    for (const char* op : {"add", "sub", "mul"})
      for (const auto& [a, b, into] : aliased) {
        Case c(op, dt);
        const Fill f = dt == TDM_S32 ? Fill::ints(-1000, 1000) : Fill::range(-2, 2);
        v.push_back(c.in(dt, a, f).in(dt, b, f).out(dt, broadcast(a, b)).alias(0, into));
      }
  for (tdm_dtype dt : kF32Bf16F16)
    for (const Dims& s : {Dims{1}, Dims{7}, Dims{3, 5, 2}}) {
      Case plain("scale", dt), ab("scale", dt);
      v.push_back(plain.in(dt, s).out(dt, s));  // defaults: identity
      ab.attrs.number("alpha", -0.37).number("beta", 1.25);
      v.push_back(ab.in(dt, s).out(dt, s));
    }
}

void add_reductions(std::vector<Case>& v) {
  struct R {
    Dims x;
    Dims axes;
    int keepdims;
  };
  const R shapes[] = {
      {{7}, {}, 0},        {{2, 3, 4}, {}, 0},       {{2, 3, 4}, {}, 1},     {{2, 3, 4}, {0}, 0},
      {{2, 3, 4}, {1}, 1}, {{2, 3, 4}, {-1}, 0},     {{2, 3, 4}, {0, 2}, 1}, {{1, 5}, {0}, 0},
      {{4, 257}, {1}, 0},  {{3, 1, 6, 2}, {1, 3}, 0}};
  for (tdm_dtype dt : kF32Bf16F16)
    for (const char* op : {"reduce_sum", "reduce_mean"})
      for (const R& r : shapes) {
        std::vector<bool> reduced(r.x.size(), r.axes.empty());
        for (int64_t a : r.axes) reduced[size_t(a < 0 ? a + int64_t(r.x.size()) : a)] = true;
        Dims y;
        int64_t k = 1;
        for (size_t i = 0; i < r.x.size(); ++i) {
          if (reduced[i]) k *= r.x[i];
          if (!reduced[i])
            y.push_back(r.x[i]);
          else if (r.keepdims)
            y.push_back(1);
        }
        Case c(op, dt);
        c.attrs.ints("axes", r.axes);
        if (r.keepdims) c.attrs.integer("keepdims", 1);
        v.push_back(c.in(dt, r.x).out(dt, y).acc(k));
      }
}

void add_shape_ops(std::vector<Case>& v) {
  for (tdm_dtype dt : kAllDtypes) {
    const Fill f = fill_for(dt);
    for (const auto& [x, y] :
         {std::pair<Dims, Dims>{{2, 3, 4}, {6, 4}}, {{5}, {1, 5, 1}}, {{3, 1, 7}, {21}}}) {
      Case c("reshape", dt);
      v.push_back(c.in(dt, x, f).out(dt, y));
    }
    const std::pair<Dims, Dims> perms[] = {{{0, 2, 1}, {2, 4, 3}}, {{2, 0, 1}, {4, 2, 3}}, {{}, {4, 3, 2}}};
    for (const auto& [perm, y] : perms) {
      Case c("transpose", dt);
      if (!perm.empty()) c.attrs.ints("perm", perm);
      v.push_back(c.in(dt, {2, 3, 4}, f).out(dt, y));
    }
    Case t4("transpose", dt);
    t4.attrs.ints("perm", {0, 2, 3, 1});
    v.push_back(t4.in(dt, {2, 3, 4, 5}, f).out(dt, {2, 4, 5, 3}));
    Case c1("concat", dt), c2("concat", dt), c3("concat", dt), c4("concat", dt);
    v.push_back(c1.in(dt, {3, 4}, f).out(dt, {3, 4}));
    c2.attrs.integer("axis", 0);
    v.push_back(c2.in(dt, {2, 5}, f).in(dt, {3, 5}, f).out(dt, {5, 5}));
    c3.attrs.integer("axis", 1);
    v.push_back(c3.in(dt, {2, 1, 3}, f).in(dt, {2, 4, 3}, f).in(dt, {2, 2, 3}, f).out(dt, {2, 7, 3}));
    c4.attrs.integer("axis", -1);
    v.push_back(c4.in(dt, {3, 2}, f).in(dt, {3, 5}, f).out(dt, {3, 7}));
    for (const Dims& s : {Dims{1}, Dims{3, 7}, Dims{2, 3, 4, 5}}) {
      Case c("copy", dt);
      v.push_back(c.in(dt, s, f).out(dt, s));
    }
    for (const Dims& s : {Dims{}, Dims{5}, Dims{2, 3, 4}}) {
      Case d("fill", dt), three("fill", dt), frac("fill", dt);
      v.push_back(d.out(dt, s));
      three.attrs.number("value", 3);
      v.push_back(three.out(dt, s));
      if (is_floating(dt)) {
        frac.attrs.number("value", 0.1);  // rounds differently in every float dtype
        v.push_back(frac.out(dt, s));
      }
      Case like("fill", dt);  // `like` (SDK 1.3): names the memory to overwrite, never read
      like.attrs.number("value", 2);
      v.push_back(like.in(dt, s, f).out(dt, s));
    }
    for (tdm_dtype to : kAllDtypes) {
      Case c("cast", dt);
      v.push_back(c.in(dt, {4, 33}, f).out(to, {4, 33}));
    }
  }
}

void add_optimizers(std::vector<Case>& v) {
  const tdm_dtype f = TDM_F32;
  struct S {
    double momentum, dampening, weight_decay;
    int nesterov, inplace;
  };
  const S sgd[] = {{0, 0, 0, 0, 0},        {0, 0, 0.01, 0, 1},   {0.9, 0, 0, 0, 0},
                   {0.9, 0.1, 1e-4, 0, 1}, {0.9, 0, 0.01, 1, 0}, {0.5, 0, 0, 1, 1}};
  for (const Dims& s : {Dims{1}, Dims{17}, Dims{4, 9}})
    for (const S& o : sgd) {
      Case c("sgd_update", f);
      c.attrs.number("momentum", o.momentum)
          .number("dampening", o.dampening)
          .number("weight_decay", o.weight_decay);
      c.attrs.integer("nesterov", o.nesterov);
      c.in(f, s).in(f, s).in(f, {}, Fill::range(0.01, 0.1));
      o.momentum != 0 ? c.in(f, s) : c.none();
      c.out(f, s);
      o.momentum != 0 ? c.out(f, s) : c.no_out();
      if (o.inplace) {
        c.alias(0, 0);
        if (o.momentum != 0) c.alias(1, 3);
      }
      v.push_back(c);
    }
  for (const Dims& s : {Dims{1}, Dims{17}, Dims{4, 9}})
    for (int variant = 0; variant < 3; ++variant) {
      Case c("adamw_update", f);
      if (variant == 1) c.attrs.number("beta1", 0.8).number("beta2", 0.99).number("weight_decay", 0.0);
      if (variant == 2) c.attrs.number("epsilon", 1e-6).number("weight_decay", 0.1);
      c.in(f, s).in(f, s).in(f, s, Fill::range(-0.1, 0.1)).in(f, s, Fill::range(0, 0.01));
      c.in(f, {}, Fill::range(1e-4, 1e-2)).in(TDM_S32, {}, Fill::ints(1, 1000));
      c.out(f, s).out(f, s).out(f, s);
      if (variant != 0) c.alias(0, 0).alias(1, 2).alias(2, 3);
      v.push_back(c);
    }
}

}  // namespace

void add_tensor_cases(std::vector<Case>& v) {
  add_elementwise(v);
  add_reductions(v);
  add_shape_ops(v);
  add_optimizers(v);
}

}  // namespace tandem::conformance
