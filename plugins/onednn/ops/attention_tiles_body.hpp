// oneDNN backend — the loops of attention_tiles.hpp, compiled once per
// vector level: attention_tiles.cpp includes this file for the baseline,
// attention_tiles_avx2.cpp and attention_tiles_avx512.cpp with their -march
// (plugins/onednn/CMakeLists.txt), each into namespace
// tiles::TANDEM_TILES_LEVEL. Plain loops the compiler vectorises for the
// target it compiles for; no intrinsics, so one source serves every level.
// Included by those three files only, hence no include guard.
#include <cstdint>
#include <cstring>

#ifndef TANDEM_TILES_LEVEL
#error "define TANDEM_TILES_LEVEL (the namespace) before including attention_tiles_body.hpp"
#endif

namespace tandem::onednn::tiles::TANDEM_TILES_LEVEL {

namespace {

// A block of kRows x kCols of c lives in registers: 8 vector accumulators,
// enough independent FMA chains to cover the FMA latency on both FMA ports
// (with 4, one AVX-512 register per row, the GPT benchmark's attention and
// its gradient took 139 ms a step on 1 thread; with 16, 106 ms). TANDEM_TILES_COLS: 16 = two AVX2 registers a
// row (the default), 32 = two AVX-512 registers.
#ifndef TANDEM_TILES_COLS
#define TANDEM_TILES_COLS 16
#endif
#ifndef TANDEM_TILES_ROWS
#define TANDEM_TILES_ROWS 4
#endif
constexpr int64_t kRows = TANDEM_TILES_ROWS;
constexpr int64_t kCols = TANDEM_TILES_COLS;

// kRows x kCols of c from the full depth k: the accumulators stay in
// registers across k (the compiler keeps a fixed-size local array there).
template <int64_t R>
inline void block(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                  int64_t cols, bool accumulate) {
  float acc[R][kCols];
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < kCols; ++j) acc[r][j] = accumulate && j < cols ? c[r * ldc + j] : 0.f;
  if (cols == kCols) {
    for (int64_t p = 0; p < k; ++p) {
      const float* bp = b + p * ldb;
      for (int64_t r = 0; r < R; ++r) {
        const float ar = a[r * lda + p];
#pragma omp simd
        for (int64_t j = 0; j < kCols; ++j) acc[r][j] += ar * bp[j];
      }
    }
  } else {
    for (int64_t p = 0; p < k; ++p) {
      const float* bp = b + p * ldb;
      for (int64_t r = 0; r < R; ++r) {
        const float ar = a[r * lda + p];
        for (int64_t j = 0; j < cols; ++j) acc[r][j] += ar * bp[j];
      }
    }
  }
  // A full-width row is stored by a loop of constant length: with `cols`
  // GCC made each row a memcpy (`rep movsq`), 16 % of the AVX2 block's time.
  if (cols == kCols) {
    for (int64_t r = 0; r < R; ++r)
#pragma omp simd
      for (int64_t j = 0; j < kCols; ++j) c[r * ldc + j] = acc[r][j];
    return;
  }
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = acc[r][j];
}

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, bool accumulate) {
  for (int64_t j = 0; j < n; j += kCols) {
    const int64_t cols = n - j < kCols ? n - j : kCols;
    int64_t i = 0;
    for (; i + kRows <= m; i += kRows)
      block<kRows>(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, cols, accumulate);
    if constexpr (kRows > 4)
      for (; i + 4 <= m; i += 4)
        block<4>(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, cols, accumulate);
    for (; i < m; ++i) block<1>(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, cols, accumulate);
  }
}

void exp_inplace(float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
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
    x[i] = v < -87.3f ? 0.f : p * scale;
  }
}

}  // namespace tandem::onednn::tiles::TANDEM_TILES_LEVEL
