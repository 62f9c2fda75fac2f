// oneDNN backend — the loops of vector_loops.hpp, compiled once per vector
// level: vector_loops.cpp includes this file for the baseline,
// vector_loops_avx2.cpp and vector_loops_avx512.cpp with their -march
// (plugins/onednn/CMakeLists.txt), each into namespace
// loops::TANDEM_LOOPS_LEVEL. Plain loops the compiler vectorises for the
// target it compiles for. Nothing here may call an inline function of
// another header: the linker keeps one copy of such a function, which could
// be this file's AVX-512 one called from baseline code.
// Included by those three files only, hence no include guard.
#include <cstdint>
#include <cstring>

#include "vector_loops.hpp"

#ifndef TANDEM_LOOPS_LEVEL
#error "define TANDEM_LOOPS_LEVEL (the namespace) before including vector_loops_body.hpp"
#endif

namespace tandem::onednn::loops::TANDEM_LOOPS_LEVEL {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;

inline float exp_of(float v) {
  const float clamped = v < -87.3f ? -87.3f : (v > 88.37f ? 88.37f : v);
  // exp(v) = 2^e · exp(r), e = round(v·log2 e), r = v − e·ln 2 in two parts.
  const float e = __builtin_floorf(clamped * 1.44269504088896341f + 0.5f);
  const float r = clamped - e * 0.693359375f + e * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  int32_t bits = static_cast<int32_t>(e + 127.f) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return v < -87.3f ? 0.f : p * scale;
}

// exp(2u) of gelu's tanh form: σ(2u) = e/(e + 1), and the exp saturates
// instead of overflowing.
inline float exp_2u(float x) {
  return exp_of(2.f * kSqrt2OverPi * (x + kCubic * x * x * x));
}

}  // namespace

void exp_inplace(float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = exp_of(x[i]);
}

// A row of the attention's tiles (online_softmax_rows, softmax_grad_rows).
namespace {

// The softmax rows of a causal attention are short and of every length (a
// tile across the diagonal has rows of 1 to 64 scores). A loop over a run-
// time length vectorises into a vector loop and a scalar remainder, which
// on these rows did up to 15 exps one at a time on AVX-512 (a third of the
// forward's exp time went to scalar code). So the rows go by chunks of one
// vector (kChunk lanes: 16 on AVX-512, 8 below) with a fixed inner loop,
// per-lane partial sums and maxima, and a last chunk whose lanes past the
// row are exp(−inf) = 0 and never stored.
#ifdef TANDEM_LOOPS_CHUNK
constexpr int64_t kChunk = TANDEM_LOOPS_CHUNK;
#else
constexpr int64_t kChunk = 8;
#endif
constexpr float kNegInf = -__builtin_inff();

// The lanes of a chunk folded in halves, a tree of log2(kChunk) steps (a
// loop over the lanes in order was a chain of 16 dependent adds or maxima).
inline float fold_sum(float* lanes) {
#pragma GCC unroll 4
  for (int64_t w = kChunk / 2; w > 0; w /= 2)
#pragma GCC unroll 8
    for (int64_t l = 0; l < w; ++l) lanes[l] += lanes[l + w];
  return lanes[0];
}
inline float fold_max(float* lanes) {
#pragma GCC unroll 4
  for (int64_t w = kChunk / 2; w > 0; w /= 2)
#pragma GCC unroll 8
    for (int64_t l = 0; l < w; ++l) lanes[l] = lanes[l + w] > lanes[l] ? lanes[l + w] : lanes[l];
  return lanes[0];
}

inline float row_max(const float* x, int64_t n, float init) {
  float lanes[kChunk];
  for (int64_t l = 0; l < kChunk; ++l) lanes[l] = init;
  int64_t i = 0;
  // The form GCC turns into a vector max; std::max's (m < x ? x : m) stayed scalar.
  for (; i + kChunk <= n; i += kChunk)
#pragma omp simd
    for (int64_t l = 0; l < kChunk; ++l) lanes[l] = x[i + l] > lanes[l] ? x[i + l] : lanes[l];
  if (i < n)
#pragma omp simd
    for (int64_t l = 0; l < kChunk; ++l) {
      const float v = i + l < n ? x[i + l] : init;
      lanes[l] = v > lanes[l] ? v : lanes[l];
    }
  return fold_max(lanes);
}

// How many scores row i of a tile may see: clamp(i + seen0, 0, cols).
inline int64_t seen_in_row(int64_t i, int64_t seen0, int64_t cols) {
  return i + seen0 < 0 ? 0 : (i + seen0 > cols ? cols : i + seen0);
}

// exp(x[i] − shift) for the i < n of a chunk from x, 0 past n.
inline void exp_chunk(const float* x, int64_t n, float shift, float* e) {
#pragma omp simd
  for (int64_t l = 0; l < kChunk; ++l) e[l] = exp_of(l < n ? x[l] - shift : kNegInf);
}

// f(j, l, exp(x[j] − shift)) for every j < n, by chunks of one vector; l is
// j's lane in its chunk. In the last chunk f sees only the j < n.
template <class F>
inline void exp_by_chunks(const float* x, int64_t n, float shift, F f) {
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk)
#pragma omp simd
    for (int64_t l = 0; l < kChunk; ++l) f(i + l, l, exp_of(x[i + l] - shift));
  if (i == n) return;
  float e[kChunk];
  exp_chunk(x + i, n - i, shift, e);
#pragma omp simd
  for (int64_t l = 0; l < kChunk; ++l)
    if (i + l < n) f(i + l, l, e[l]);
}

inline float exp_shifted_sum(float* x, int64_t n, float shift) {
  float lanes[kChunk] = {};
  exp_by_chunks(x, n, shift, [&](int64_t j, int64_t l, float e) {
    x[j] = e;
    lanes[l] += e;
  });
  return fold_sum(lanes);
}

inline void softmax_grad_row(float* p, float* dp, int64_t n, float lse, float delta) {
  exp_by_chunks(p, n, lse, [&](int64_t j, int64_t, float e) {
    p[j] = e;
    dp[j] = e * (dp[j] - delta);
  });
}

}  // namespace

void online_softmax_rows(float* sc, int64_t rows, int64_t cols, int64_t seen0, float* m, float* l, float* acc,
                         int64_t e) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = sc + i * cols;
    const int64_t seen = seen_in_row(i, seen0, cols);
    for (int64_t j = seen; j < cols; ++j) row[j] = 0.f;
    const float mnew = row_max(row, seen, m[i]);
    if (mnew == kNegInf) {  // nothing allowed yet: the tile adds nothing to this row
      for (int64_t j = 0; j < seen; ++j) row[j] = 0.f;
      continue;
    }
    const float alpha = m[i] == kNegInf ? 0.f : __builtin_expf(m[i] - mnew);
    l[i] = l[i] * alpha + exp_shifted_sum(row, seen, mnew);
    m[i] = mnew;
    float* out = acc + i * e;
#pragma omp simd
    for (int64_t j = 0; j < e; ++j) out[j] *= alpha;
  }
}

void softmax_grad_rows(float* p, float* dp, int64_t rows, int64_t cols, int64_t seen0, const float* lse,
                       const float* delta) {
  for (int64_t i = 0; i < rows; ++i) {
    float* pi = p + i * cols;
    float* dpi = dp + i * cols;
    // A row that attended nothing (lse = −inf) has p = 0 and so ds = 0.
    const int64_t seen = lse[i] == kNegInf ? 0 : seen_in_row(i, seen0, cols);
    for (int64_t j = seen; j < cols; ++j) pi[j] = dpi[j] = 0.f;
    softmax_grad_row(pi, dpi, seen, lse[i], delta[i]);
  }
}

void row_dots(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows, int64_t n, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *ar = a + r * lda, *br = b + r * ldb;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) sum += ar[i] * br[i];
    out[r] = sum;
  }
}

void scale_rows(const float* src, int64_t lds, int64_t rows, int64_t cols, float mul, float* dst,
                int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * lds;
    float* d = dst + r * ldd;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) d[c] = s[c] * mul;
  }
}

// The catalog's mask written out, since this file may not call the SDK's
// inline dropout_uniform: u = the top 24 bits of SplitMix64's finaliser of
// seed + (i + 1)·golden_gamma, times 2^-24. u >= p compares a 24-bit
// integer scaled exactly, so it is the integer test bits >= ceil(p·2^24),
// which needs no conversion to float and no branch, and vectorises: the
// 64-bit products as 32-bit ones on AVX2, vpmullq on AVX-512 (the baseline
// copy stays scalar). tests/onednn/test_attention.cpp (attention) and
// test_dropout.cpp (the dropout op) hold the factors against the SDK's mask.
void dropout_factors(uint64_t seed, uint64_t first, double p, int64_t n, float* d) {
  const float scale = 1.f / (1.f - float(p));
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  const uint64_t threshold = uint64_t(__builtin_ceil(p * 16777216.0));
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    uint64_t z = seed + (first + uint64_t(j) + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    const uint32_t kept = uint32_t(0) - uint32_t((z >> 40) >= threshold);  // all ones or zero
    const uint32_t bits = scale_bits & kept;
    std::memcpy(d + j, &bits, sizeof bits);
  }
}

void gelu_tanh(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i], e = exp_2u(v);
    y[i] = v * (e / (e + 1.f));
  }
}

// d/dx x·σ(2u) = σ(2u) + 2x·σ(2u)(1 − σ(2u))·u', σ(1 − σ) = e/(e + 1)²,
// u' = √(2/π)·(1 + 3·0.044715·x²). One division, r = 1/(e + 1), not two
// (e/p and e/p²): 2.88 against 3.04 ms over the GPT's 4096 x 768 on
// AVX-512, 1 thread, timed alone.
void gelu_tanh_grad(const float* dy, const float* x, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i], two_u = 2.f * kSqrt2OverPi * (v + kCubic * v * v * v), e = exp_of(two_u);
    // σ = 1 − r where that does not cancel (e > 1), so it is exactly 1 once saturated.
    const float r = 1.f / (e + 1.f), s = e > 1.f ? 1.f - r : e * r, sp = s * r;
    // Where σ has saturated (|2u| > 44: sp < 2^-63), x·u' may be inf: the
    // term, below 2^-56 in magnitude where x·u' is finite, is dropped. That
    // also keeps sp out of the subnormals of e's far ends (slow on most x86).
    const float bend =
        __builtin_fabsf(two_u) > 44.f ? 0.f : 2.f * v * sp * kSqrt2OverPi * (1.f + 3.f * kCubic * v * v);
    dx[i] = dy[i] * (s + bend);
  }
}

void layer_norm_row(const float* x, const float* gamma, const float* beta, float* y, int64_t d, float eps,
                    float* mean, float* rstd) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < d; ++i) sum += x[i];
  const double mu = sum / double(d);
  double sq = 0;
#pragma omp simd reduction(+ : sq)
  for (int64_t i = 0; i < d; ++i) {
    const double c = x[i] - mu;
    sq += c * c;
  }
  const double rs = 1.0 / __builtin_sqrt(sq / double(d) + double(eps));
  const float m = float(mu), s = float(rs);
#pragma omp simd
  for (int64_t i = 0; i < d; ++i) y[i] = (x[i] - m) * s * gamma[i] + beta[i];
  *mean = m;
  *rstd = s;
}

void layer_norm_grad_row(const float* dy, const float* x, const float* gamma, float mean, float rstd,
                         const float* addend, float* dx, int64_t d) {
  double sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
  for (int64_t i = 0; i < d; ++i) {
    const float g = dy[i] * gamma[i];
    sg += g;
    sgx += double(g) * double((x[i] - mean) * rstd);
  }
  const float mg = float(sg / double(d)), mgx = float(sgx / double(d));
  if (addend == nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) {
      const float xh = (x[i] - mean) * rstd;
      dx[i] = rstd * (dy[i] * gamma[i] - mg - xh * mgx);
    }
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < d; ++i) {
    const float xh = (x[i] - mean) * rstd;
    dx[i] = rstd * (dy[i] * gamma[i] - mg - xh * mgx) + addend[i];
  }
}

void layer_norm_param_sums(const float* dy, const float* x, float mean, float rstd, float* dgamma,
                           float* dbeta, int64_t d) {
#pragma omp simd
  for (int64_t i = 0; i < d; ++i) {
    dgamma[i] += dy[i] * (x[i] - mean) * rstd;
    dbeta[i] += dy[i];
  }
}

void adamw(const AdamW& h, const float* param, const float* grad, const float* m, const float* v,
           float* param_out, float* m_out, float* v_out, int64_t n) {
  // Locals, not h's fields: the stores below could alias h as far as the compiler knows.
  const float b1 = h.b1, b2 = h.b2, cb1 = h.one_minus_b1, cb2 = h.one_minus_b2, bc1 = h.bc1, bc2 = h.bc2,
              lr = h.lr, eps = h.eps, decay = h.decay;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float mi = b1 * m[i] + cb1 * g;
    const float vi = b2 * v[i] + cb2 * g * g;
    m_out[i] = mi;
    v_out[i] = vi;
    param_out[i] = param[i] * decay - lr * (mi / bc1) / (__builtin_sqrtf(vi / bc2) + eps);
  }
}

void sgd(const Sgd& h, const float* param, const float* grad, const float* buf, float* param_out,
         float* buf_out, int64_t n) {
  // Locals, not h's fields: the stores below could alias h as far as the compiler knows.
  const float lr = h.lr, wd = h.wd, momentum = h.momentum, damp = h.damp;
  if (buf == nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) param_out[i] = param[i] - lr * (grad[i] + wd * param[i]);
  } else if (h.nesterov) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float g = grad[i] + wd * param[i];
      const float b = momentum * buf[i] + damp * g;
      buf_out[i] = b;
      param_out[i] = param[i] - lr * (g + momentum * b);
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float g = grad[i] + wd * param[i];
      const float b = momentum * buf[i] + damp * g;
      buf_out[i] = b;
      param_out[i] = param[i] - lr * b;
    }
  }
}

}  // namespace tandem::onednn::loops::TANDEM_LOOPS_LEVEL
