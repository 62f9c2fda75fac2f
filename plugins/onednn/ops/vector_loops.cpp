// oneDNN backend — the element-wise loops (vector_loops.hpp): the baseline
// copy, and the choice between the copies.
#include "vector_loops.hpp"

#include "cpu_isa.hpp"

#define TANDEM_LOOPS_LEVEL baseline
#include "vector_loops_body.hpp"

namespace tandem::onednn::loops {

// The other copies (vector_loops_avx2.cpp, vector_loops_avx512.cpp).
#define TANDEM_LOOPS_DECLARE(level)                                                                          \
  namespace level {                                                                                          \
  void exp_inplace(float* x, int64_t n);                                                                     \
  void row_dots(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows, int64_t n,           \
                float* out);                                                                                 \
  void scale_rows(const float* src, int64_t lds, int64_t rows, int64_t cols, float mul, float* dst,          \
                  int64_t ldd);                                                                              \
  void dropout_factors(uint64_t seed, uint64_t first, double p, int64_t n, float* d);                        \
  void online_softmax_rows(float* sc, int64_t rows, int64_t cols, int64_t seen0, float* m, float* l,         \
                           float* acc, int64_t e);                                                           \
  void softmax_grad_rows(float* p, float* dp, int64_t rows, int64_t cols, int64_t seen0, const float* lse,   \
                         const float* delta);                                                                \
  void gelu_tanh(const float* x, float* y, int64_t n);                                                       \
  void gelu_tanh_grad(const float* dy, const float* x, float* dx, int64_t n);                                \
  void layer_norm_row(const float* x, const float* gamma, const float* beta, float* y, int64_t d, float eps, \
                      float* mean, float* rstd);                                                             \
  void layer_norm_grad_row(const float* dy, const float* x, const float* gamma, float mean, float rstd,      \
                           const float* addend, float* dx, int64_t d);                                       \
  void layer_norm_param_sums(const float* dy, const float* x, float mean, float rstd, float* dgamma,         \
                             float* dbeta, int64_t d);                                                       \
  void adamw(const AdamW& h, const float* param, const float* grad, const float* m, const float* v,          \
             float* param_out, float* m_out, float* v_out, int64_t n);                                       \
  void sgd(const Sgd& h, const float* param, const float* grad, const float* buf, float* param_out,          \
           float* buf_out, int64_t n);                                                                       \
  }
TANDEM_LOOPS_DECLARE(avx2)
TANDEM_LOOPS_DECLARE(avx512)
#undef TANDEM_LOOPS_DECLARE

// Each entry point asks for its copy once.
#define TANDEM_LOOPS_PICK(fn) by_vector_level<decltype(&baseline::fn)>(avx512::fn, avx2::fn, baseline::fn)

void exp_inplace(float* x, int64_t n) {
  static const auto fn = TANDEM_LOOPS_PICK(exp_inplace);
  fn(x, n);
}

void online_softmax_rows(float* sc, int64_t rows, int64_t cols, int64_t seen0, float* m, float* l, float* acc,
                         int64_t e) {
  static const auto fn = TANDEM_LOOPS_PICK(online_softmax_rows);
  fn(sc, rows, cols, seen0, m, l, acc, e);
}

void softmax_grad_rows(float* p, float* dp, int64_t rows, int64_t cols, int64_t seen0, const float* lse,
                       const float* delta) {
  static const auto fn = TANDEM_LOOPS_PICK(softmax_grad_rows);
  fn(p, dp, rows, cols, seen0, lse, delta);
}

void row_dots(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows, int64_t n, float* out) {
  static const auto fn = TANDEM_LOOPS_PICK(row_dots);
  fn(a, lda, b, ldb, rows, n, out);
}

void scale_rows(const float* src, int64_t lds, int64_t rows, int64_t cols, float mul, float* dst,
                int64_t ldd) {
  static const auto fn = TANDEM_LOOPS_PICK(scale_rows);
  fn(src, lds, rows, cols, mul, dst, ldd);
}

void dropout_factors(uint64_t seed, uint64_t first, double p, int64_t n, float* d) {
  static const auto fn = TANDEM_LOOPS_PICK(dropout_factors);
  fn(seed, first, p, n, d);
}

void gelu_tanh(const float* x, float* y, int64_t n) {
  static const auto fn = TANDEM_LOOPS_PICK(gelu_tanh);
  fn(x, y, n);
}

void gelu_tanh_grad(const float* dy, const float* x, float* dx, int64_t n) {
  static const auto fn = TANDEM_LOOPS_PICK(gelu_tanh_grad);
  fn(dy, x, dx, n);
}

void layer_norm_row(const float* x, const float* gamma, const float* beta, float* y, int64_t d, float eps,
                    float* mean, float* rstd) {
  static const auto fn = TANDEM_LOOPS_PICK(layer_norm_row);
  fn(x, gamma, beta, y, d, eps, mean, rstd);
}

void layer_norm_grad_row(const float* dy, const float* x, const float* gamma, float mean, float rstd,
                         const float* addend, float* dx, int64_t d) {
  static const auto fn = TANDEM_LOOPS_PICK(layer_norm_grad_row);
  fn(dy, x, gamma, mean, rstd, addend, dx, d);
}

void layer_norm_param_sums(const float* dy, const float* x, float mean, float rstd, float* dgamma,
                           float* dbeta, int64_t d) {
  static const auto fn = TANDEM_LOOPS_PICK(layer_norm_param_sums);
  fn(dy, x, mean, rstd, dgamma, dbeta, d);
}

void adamw(const AdamW& h, const float* param, const float* grad, const float* m, const float* v,
           float* param_out, float* m_out, float* v_out, int64_t n) {
  static const auto fn = TANDEM_LOOPS_PICK(adamw);
  fn(h, param, grad, m, v, param_out, m_out, v_out, n);
}

void sgd(const Sgd& h, const float* param, const float* grad, const float* buf, float* param_out,
         float* buf_out, int64_t n) {
  static const auto fn = TANDEM_LOOPS_PICK(sgd);
  fn(h, param, grad, buf, param_out, buf_out, n);
}

#undef TANDEM_LOOPS_PICK

}  // namespace tandem::onednn::loops
