// The tolerance table: one row per op class, one column per dtype, each
// number with its reason. The metric is compare.hpp's
//     err = |got - expected| / max(1, |expected|),
// so a tolerance reads as "relative for large values, absolute for small".
//
// Units behind the numbers: the spacing of floats just above 1.0 is 2^-52
// (f64), 2^-23 ~ 1.2e-7 (f32), 2^-10 ~ 9.8e-4 (f16) and 2^-7 ~ 7.8e-3
// (bf16, 8-bit significand). A correctly rounded result is within half of
// that; two correct backends that round a slightly different f32 value can
// land one spacing apart.
#include <cmath>
#include <cstdio>

#include "tandem/conformance/compare.hpp"

namespace tandem::conformance {

namespace {

struct Row {
  OpClass cls;
  const char* name;
  double f64, f32, bf16, f16;
  // Extra tolerance per sqrt(k) accumulated terms: the catalog accumulates in
  // f32 (or wider) whatever the storage dtype, and a different summation
  // order (blocked GEMM, tree reduction, Winograd...) moves the result by a
  // few f32 roundings per sqrt(k) — a random walk, not k worst cases.
  double acc_f64, acc_other;
  const char* reason;
};

const Row kTable[] = {
    {OpClass::exact, "exact", 0, 0, 0, 0, 0, 0,
     "data movement or selection (reshape, transpose, concat, copy, fill, cast with its fixed RNE "
     "rule, gather, max, relu): no arithmetic, so any difference is a bug"},
    {OpClass::elementwise, "elementwise", 1e-14, 1e-6, 1.6e-2, 2e-3, 0, 0,
     "one or two roundings per element (x*alpha+beta with or without FMA, x/(1-p) vs x*(1/(1-p))): "
     "f32 1e-6 ~ 8 ulp; bf16/f16 allow 2 spacings of the 8-/11-bit significand (1.6e-2, 2e-3)"},
    {OpClass::transcendental, "transcendental", 1e-12, 1e-5, 1.6e-2, 4e-3, 0, 0,
     "exp/tanh/erf/sin/cos from different math libraries (libm, SVML, CUDA intrinsics) differ by a few "
     "ulp and compose (gelu, softmax): f32 1e-5 ~ 80 ulp; f16 4 spacings"},
    {OpClass::accumulate, "accumulate", 1e-14, 2e-6, 1.6e-2, 2e-3, 1e-15, 1e-6,
     "sums of k products or terms (matmul, linear, conv, pooling, reductions, scatter-add): "
     "summation order is free, so the bound grows with sqrt(k); 16-bit outputs add one final rounding"},
    {OpClass::normalization, "normalization", 1e-12, 1e-5, 3e-2, 5e-3, 1e-15, 1e-6,
     "mean, variance, rsqrt and a division, amplified by 1/std (inputs have std ~0.6), and the "
     "cross-entropy's and attention's log-sum-exp: f32 1e-5; bf16 allows ~4 spacings, f16 ~5"},
    {OpClass::optimizer, "optimizer", 1e-12, 1e-5, 1.6e-2, 4e-3, 0, 0,
     "AdamW's sqrt, division and pow(beta, step) bias correction come from different math "
     "libraries; SGD is plain elementwise but shares the row"},
};

const Row& row(OpClass c) {
  for (const Row& r : kTable)
    if (r.cls == c) return r;
  return kTable[1];
}

}  // namespace

OpClass op_class(const std::string& op) {
  const catalog::Op* entry = catalog::find(op);
  // An op the catalog does not define (a third party's custom op) is held
  // to the strictest arithmetic class.
  return entry == nullptr || entry->entry->tolerance == OpClass::unset ? OpClass::elementwise
                                                                       : entry->entry->tolerance;
}

const char* op_class_name(OpClass c) noexcept {
  return row(c).name;
}

double tolerance(const std::string& op, tdm_dtype dtype, int64_t k) {
  if (!is_floating(dtype)) return 0;  // integers, labels, masks: exact
  const Row& r = row(op_class(op));
  double base = dtype == TDM_F64 ? r.f64 : dtype == TDM_F32 ? r.f32 : dtype == TDM_BF16 ? r.bf16 : r.f16;
  double acc = dtype == TDM_F64 ? r.acc_f64 : r.acc_other;
  return base + (k > 0 ? acc * std::sqrt(static_cast<double>(k)) : 0.0);
}

std::string tolerance_table() {
  std::string s = "tolerance classes (err = |got-exp| / max(1,|exp|); integer outputs exact):\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-15s %-8s %-8s %-8s %-8s %s\n", "class", "f64", "f32", "bf16", "f16",
                "+ per sqrt(k) (f64 / others)");
  s += buf;
  for (const Row& r : kTable) {
    std::snprintf(buf, sizeof buf, "  %-15s %-8.2g %-8.2g %-8.2g %-8.2g %.2g / %.2g\n", r.name, r.f64, r.f32,
                  r.bf16, r.f16, r.acc_f64, r.acc_other);
    s += buf;
    s += std::string("      why: ") + r.reason + "\n";
  }
  s += "  ops:";
  OpClass last = OpClass::exact;
  bool first = true;
  for (const Row& r : kTable) {
    for (const catalog::Op& op : catalog::ops())
      if (op.entry->tolerance == r.cls) {
        if (first || r.cls != last) s += std::string("\n    ") + r.name + ":";
        s += " " + op.name;
        last = r.cls;
        first = false;
      }
  }
  return s + "\n";
}

}  // namespace tandem::conformance
