// oneDNN backend — softmax_cross_entropy (+grad), embedding (+grad), dropout
// (+grad): own code. Launch-time values (labels, indices) are validated in a
// short serial pass first (exceptions must not leave an OpenMP region), then
// the work runs row-parallel. Dropout's mask is the catalog's counter-based
// hash, so it is bit-identical to reference whatever the thread layout.
#include <cmath>

#include "common.hpp"

namespace tandem::onednn {

namespace {

struct CE {
  int64_t n, c, ignore;
  bool mean;
  float eps;
  std::string where;
};

CE ce_check(const Check& c, size_t first) {
  c.primary_dtype(first, kF32);
  if (c.in(first).rank() != 2) c.fail("logits must be [N, C]");
  CE e{c.in(first).dims[0],
       c.in(first).dims[1],
       c.int_attr("ignore_index", -100),
       true,
       float(c.float_attr("label_smoothing", 0.0)),
       c.where()};
  c.input(first + 1, TDM_S32, {e.n});
  const std::string red = c.string_attr("reduction", "mean");
  if (red != "mean" && red != "sum") c.fail("reduction must be mean/sum, got '" + red + "'");
  e.mean = red == "mean";
  if (!(e.eps >= 0.f && e.eps <= 1.f)) c.fail("label_smoothing must lie in [0, 1]");
  return e;
}

// Checks every label; returns the number of samples that count.
int64_t count_labels(const CE& e, const int32_t* labels) {
  int64_t count = 0;
  for (int64_t i = 0; i < e.n; ++i) {
    if (labels[i] == e.ignore) continue;
    if (labels[i] < 0 || labels[i] >= e.c)
      throw Error(TDM_INVALID_ARGUMENT, "onednn: " + e.where + ": label " + std::to_string(labels[i]) +
                                            " of sample " + std::to_string(i) + " is outside [0, " +
                                            std::to_string(e.c) + ")");
    ++count;
  }
  return count;
}

// max and log-sum-exp of one row.
inline void row_lse(const float* x, int64_t c, float& mx, double& lse) {
  mx = x[0];
  for (int64_t j = 1; j < c; ++j) mx = x[j] > mx ? x[j] : mx;
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < c; ++j) s += std::exp(x[j] - mx);
  lse = std::log(s) + mx;
}

std::unique_ptr<Kernel> cross_entropy(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 2, 1, 1);
  const CE e = ce_check(c, 0);
  c.output(0, TDM_F32, {});
  ws = size_t(e.n) * sizeof(double);
  return make_fn(c, [e](void* const* in, void* const* out, void* w) {
    const float* x = static_cast<const float*>(in[0]);
    const int32_t* labels = static_cast<const int32_t*>(in[1]);
    double* per_row = static_cast<double*>(w);
    const int64_t count = count_labels(e, labels);
#pragma omp parallel for schedule(static) if (e.n * e.c > kParallelGrain)
    for (int64_t i = 0; i < e.n; ++i) {
      per_row[i] = 0;
      if (labels[i] == e.ignore) continue;
      const float* r = x + i * e.c;
      float mx;
      double lse, sum = 0;
      row_lse(r, e.c, mx, lse);
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < e.c; ++j) sum += r[j];
      per_row[i] = (1.0 - e.eps) * (lse - r[labels[i]]) + e.eps * (lse - sum / double(e.c));
    }
    double total = 0;
    for (int64_t i = 0; i < e.n; ++i) total += per_row[i];  // fixed order: reproducible
    *static_cast<float*>(out[0]) = float(e.mean ? (count ? total / double(count) : 0.0) : total);
  });
}

std::unique_ptr<Kernel> cross_entropy_grad(const OpView& op, size_t&) {
  Check c(op);
  c.counts(3, 3, 1, 1);
  c.input(0, TDM_F32, {});
  const CE e = ce_check(c, 1);
  c.output(0, TDM_F32, {e.n, e.c});
  return make_fn(c, [e](void* const* in, void* const* out, void*) {
    const float dloss = *static_cast<const float*>(in[0]);
    const float* x = static_cast<const float*>(in[1]);
    const int32_t* labels = static_cast<const int32_t*>(in[2]);
    float* dx = static_cast<float*>(out[0]);
    const int64_t count = count_labels(e, labels);
    const float s = e.mean ? (count ? float(double(dloss) / double(count)) : 0.f) : dloss;
    const float off = e.eps / float(e.c), hit = 1.f - e.eps;
#pragma omp parallel for schedule(static) if (e.n * e.c > kParallelGrain)
    for (int64_t i = 0; i < e.n; ++i) {
      float* d = dx + i * e.c;
      if (labels[i] == e.ignore) {
        for (int64_t j = 0; j < e.c; ++j) d[j] = 0.f;
        continue;
      }
      const float* r = x + i * e.c;
      float mx;
      double lse;
      row_lse(r, e.c, mx, lse);
      const float l = float(lse);
#pragma omp simd
      for (int64_t j = 0; j < e.c; ++j) d[j] = s * (std::exp(r[j] - l) - off);
      d[labels[i]] -= s * hit;
    }
  });
}

// Launch-time index check shared by embedding and its gradient (none for a
// vocabulary slice: there an index outside the slice reads a zero row).
void check_indices(const int32_t* idx, int64_t n, int64_t v, int64_t vocab_start, const std::string& where) {
  if (vocab_start >= 0) return;
  for (int64_t i = 0; i < n; ++i)
    if (idx[i] < 0 || idx[i] >= v)
      throw Error(TDM_INVALID_ARGUMENT, "onednn: " + where + ": index " + std::to_string(idx[i]) +
                                            " at flat position " + std::to_string(i) + " is outside [0, " +
                                            std::to_string(v) + ")");
}

std::unique_ptr<Kernel> embedding(const OpView& op, size_t&) {
  Check c(op);
  c.counts(2, 2, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  if (c.in(0).rank() != 2) c.fail("table must be [V, D]");
  const int64_t v = c.in(0).dims[0], d = c.in(0).dims[1];
  c.input_dtype(1, {TDM_S32});
  Dims y = c.in(1).dims;
  y.push_back(d);
  c.output(0, dt, y);
  const int64_t pad = c.int_attr("padding_idx", -1);
  if (pad >= v) c.fail("padding_idx " + std::to_string(pad) + " is >= V = " + std::to_string(v));
  const int64_t n = numel(c.in(1).dims);
  const size_t row = size_t(d) * dtype_size(dt);
  const int64_t start = c.int_attr("vocab_start", -1);
  const std::string where = c.where();
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const char* table = static_cast<const char*>(in[0]);
    const int32_t* idx = static_cast<const int32_t*>(in[1]);
    check_indices(idx, n, v, start, where);
    char* o = static_cast<char*>(out[0]);
    const int64_t shift = start >= 0 ? start : 0;
#pragma omp parallel for schedule(static) if (n * d > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = int64_t(idx[i]) - shift;
      if (r >= 0 && r < v)
        std::memcpy(o + size_t(i) * row, table + size_t(r) * row, row);
      else
        std::memset(o + size_t(i) * row, 0, row);
    }
  });
}

std::unique_ptr<Kernel> embedding_grad(const OpView& op, size_t&) {
  Check c(op);
  c.counts(2, 2, 1, 1);
  c.primary_dtype(0, kF32);
  c.input_dtype(1, {TDM_S32});
  if (!c.has_output(0) || c.out(0).rank() != 2) c.fail("dtable must be [V, D]");
  const int64_t v = c.out(0).dims[0], d = c.out(0).dims[1];
  Dims y = c.in(1).dims;
  y.push_back(d);
  c.input_shape(0, y);
  c.output(0, TDM_F32, {v, d});
  const int64_t pad = c.int_attr("padding_idx", -1);
  if (pad >= v) c.fail("padding_idx " + std::to_string(pad) + " is >= V = " + std::to_string(v));
  const int64_t n = numel(c.in(1).dims);
  const int64_t start = c.int_attr("vocab_start", -1);
  const int64_t shift = start >= 0 ? start : 0;
  const std::string where = c.where();
  return make_fn(c, [=](void* const* in, void* const* out, void*) {
    const float* dy = static_cast<const float*>(in[0]);
    const int32_t* idx = static_cast<const int32_t*>(in[1]);
    check_indices(idx, n, v, start, where);
    float* dt = static_cast<float*>(out[0]);
    // Column blocks in parallel, indices in order: deterministic sums.
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (d + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n * d > kParallelGrain)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t lo = b * kBlock, hi = std::min(d, lo + kBlock);
      for (int64_t r = 0; r < v; ++r)
        for (int64_t j = lo; j < hi; ++j) dt[r * d + j] = 0.f;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = int64_t(idx[i]) - shift;
        if (r < 0 || r >= v || r == pad) continue;
        float* dst = dt + r * d;
        const float* src = dy + i * d;
#pragma omp simd
        for (int64_t j = lo; j < hi; ++j) dst[j] += src[j];
      }
    }
  });
}

double dropout_p(const Check& c) {
  const double p = c.float_attr("p", 0.5);
  if (!(p >= 0.0 && p <= 1.0)) c.fail("p must be in [0, 1], got " + std::to_string(p));
  return p;
}

inline bool dropout_keep(uint64_t seed, uint64_t i, double p) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return double(z >> 40) * 0x1p-24 >= p;
}

std::unique_ptr<Kernel> dropout(const OpView& op, size_t&) {
  Check c(op);
  c.counts(1, 2, 2, 2);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims shape = c.in(0).dims;
  c.output(0, dt, shape);
  c.output(1, TDM_U8, shape);
  const bool has_offset = c.has_input(1);
  if (has_offset) c.input(1, TDM_S64, {});
  const double p = dropout_p(c);
  const uint64_t base = static_cast<uint64_t>(c.int_attr("seed", 0));
  const int64_t n = numel(shape);
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [=](void* const* in, void* const* out, void*) {
      const uint64_t seed = base + (has_offset ? uint64_t(*static_cast<const int64_t*>(in[1])) : 0);
      const T* x = static_cast<const T*>(in[0]);
      T* y = static_cast<T*>(out[0]);
      uint8_t* mask = static_cast<uint8_t*>(out[1]);
      const float scale = float(1.0 - p);
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        const bool keep = p == 0.0 || dropout_keep(seed, uint64_t(i), p);
        st(y, i, keep ? ld(x, i) / scale : 0.f);
        mask[i] = keep ? 1 : 0;
      }
    });
  });
}

std::unique_ptr<Kernel> dropout_grad(const OpView& op, size_t&) {
  Check c(op);
  c.counts(2, 2, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims shape = c.in(0).dims;
  c.input(1, TDM_U8, shape);
  c.output(0, dt, shape);
  const float scale = float(1.0 - dropout_p(c));
  const int64_t n = numel(shape);
  return with_f32_bf16(dt, [&](auto t) {
    using T = decltype(t);
    return make_fn(c, [=](void* const* in, void* const* out, void*) {
      const T* dy = static_cast<const T*>(in[0]);
      const uint8_t* mask = static_cast<const uint8_t*>(in[1]);
      T* dx = static_cast<T*>(out[0]);
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) st(dx, i, mask[i] ? ld(dy, i) / scale : 0.f);
    });
  });
}

}  // namespace

void register_loss(const Registrar& add) {
  add("softmax_cross_entropy", cross_entropy);
  add("softmax_cross_entropy_grad", cross_entropy_grad);
  add("embedding", embedding);
  add("embedding_grad", embedding_grad);
  add("dropout", dropout);
  add("dropout_grad", dropout_grad);
}

}  // namespace tandem::onednn
