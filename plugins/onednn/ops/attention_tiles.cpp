// oneDNN backend — attention's tile arithmetic (attention_tiles.hpp): the
// baseline copy of the loops, and the choice between the copies.
#include "attention_tiles.hpp"

#include "cpu_isa.hpp"

#define TANDEM_TILES_LEVEL baseline
#include "attention_tiles_body.hpp"

namespace tandem::onednn::tiles {

// The other copies (attention_tiles_avx2.cpp, attention_tiles_avx512.cpp).
#define TANDEM_TILES_DECLARE(level)                                                                       \
  namespace level {                                                                                       \
  void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,    \
            float* c, int64_t ldc, bool accumulate, Causal causal);                                       \
  void gemm_tn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, \
               float* c, int64_t ldc, bool accumulate, Causal causal);                                    \
  void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst);                  \
  }
TANDEM_TILES_DECLARE(avx2)
TANDEM_TILES_DECLARE(avx512)
#undef TANDEM_TILES_DECLARE

namespace {

using GemmFn = decltype(&baseline::gemm);

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, bool accumulate, Causal causal) {
  static const GemmFn fn = by_vector_level<GemmFn>(avx512::gemm, avx2::gemm, baseline::gemm);
  fn(m, n, k, a, lda, b, ldb, c, ldc, accumulate, causal);
}

void gemm_tn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
             float* c, int64_t ldc, bool accumulate, Causal causal) {
  static const GemmFn fn = by_vector_level<GemmFn>(avx512::gemm_tn, avx2::gemm_tn, baseline::gemm_tn);
  fn(m, n, k, a, lda, b, ldb, c, ldc, accumulate, causal);
}

void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst) {
  using TransposeFn = decltype(&baseline::transpose);
  static const TransposeFn fn =
      by_vector_level<TransposeFn>(avx512::transpose, avx2::transpose, baseline::transpose);
  fn(rows, cols, src, lds, dst);
}

}  // namespace tandem::onednn::tiles
