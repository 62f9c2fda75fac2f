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

// A block of kRows x kCols of c lives in registers: with 6 rows of two
// vectors (AVX2) or 8 rows of two (AVX-512), 12 or 16 independent FMA
// chains, enough to cover the FMA latency on both FMA ports (with 4
// accumulators, one AVX-512 register per row, the GPT benchmark's attention
// and its gradient took 139 ms a step on 1 thread; with 16, 106 ms).
// TANDEM_TILES_COLS: 16 = two AVX2 registers a row (the default), 32 = two
// AVX-512 registers.
#ifndef TANDEM_TILES_COLS
#define TANDEM_TILES_COLS 16
#endif
#ifndef TANDEM_TILES_ROWS
#define TANDEM_TILES_ROWS 4
#endif
constexpr int64_t kRows = TANDEM_TILES_ROWS;
constexpr int64_t kCols = TANDEM_TILES_COLS;

// The accumulators are GCC vectors of half a block row, so they are
// registers by type: as a float array the compiler initialised and stored
// them element by element through the stack, which at the attention's
// depths (32 and 64) cost about as much as the products.
constexpr int64_t kLanes = kCols / 2;
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, Vec v) {
  std::memcpy(p, &v, sizeof v);
}
// x in every lane: one broadcast from memory (Vec{} + x would add +0.0 first,
// an extra instruction on the adder per row and step, as -0.0 + 0.0 is not -0.0).
inline Vec splat(float x) {
  return x - Vec{};
}

// Where a(r, p) lives: a[r * row + p * col] (row-major a: col = 1; a stored
// transposed: row = 1).
struct Strides {
  int64_t row, col;
};

// R full-width rows of c from the full depth k.
template <int64_t R>
inline void full_block(int64_t k, const float* a, Strides as, const float* b, int64_t ldb, float* c,
                       int64_t ldc, bool accumulate) {
  Vec acc[R][2];
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < 2; ++h) acc[r][h] = accumulate ? load(c + r * ldc + h * kLanes) : Vec{};
  for (int64_t p = 0; p < k; ++p) {
    const Vec b0 = load(b + p * ldb), b1 = load(b + p * ldb + kLanes);
    for (int64_t r = 0; r < R; ++r) {
      const Vec ar = splat(a[r * as.row + p * as.col]);
      acc[r][0] += ar * b0;
      acc[r][1] += ar * b1;
    }
  }
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < 2; ++h) store(c + r * ldc + h * kLanes, acc[r][h]);
}

// The last columns of c (cols < kCols), one row at a time: the same sums in
// the same order as full_block, so a column's value does not depend on
// whether it falls in the tail.
inline void tail_row(int64_t k, const float* a, Strides as, const float* b, int64_t ldb, float* c,
                     int64_t cols, bool accumulate) {
  float acc[kCols];
  for (int64_t j = 0; j < cols; ++j) acc[j] = accumulate ? c[j] : 0.f;
  for (int64_t p = 0; p < k; ++p) {
    const float ar = a[p * as.col];
    for (int64_t j = 0; j < cols; ++j) acc[j] += ar * b[p * ldb + j];
  }
  for (int64_t j = 0; j < cols; ++j) c[j] = acc[j];
}

void product(int64_t m, int64_t n, int64_t k, const float* a, Strides as, const float* b, int64_t ldb,
             float* c, int64_t ldc, bool accumulate) {
  for (int64_t j = 0; j < n; j += kCols) {
    if (n - j < kCols) {
      for (int64_t i = 0; i < m; ++i)
        tail_row(k, a + i * as.row, as, b + j, ldb, c + i * ldc + j, n - j, accumulate);
      break;
    }
    int64_t i = 0;
    for (; i + kRows <= m; i += kRows)
      full_block<kRows>(k, a + i * as.row, as, b + j, ldb, c + i * ldc + j, ldc, accumulate);
    if constexpr (kRows > 4)
      for (; i + 4 <= m; i += 4)
        full_block<4>(k, a + i * as.row, as, b + j, ldb, c + i * ldc + j, ldc, accumulate);
    for (; i < m; ++i) full_block<1>(k, a + i * as.row, as, b + j, ldb, c + i * ldc + j, ldc, accumulate);
  }
}

// An 8 x 8 block transposed in registers: unpack pairs of rows, shuffle
// pairs of pairs, then swap 128-bit halves (on AVX2 the unpck/shufps/
// vperm2f128 sequence; the baseline lowers each 8-wide shuffle to two SSE ones).
typedef float Vec8 __attribute__((vector_size(8 * sizeof(float))));
typedef int32_t Mask8 __attribute__((vector_size(8 * sizeof(int32_t))));

inline void transpose8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  Vec8 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) std::memcpy(&r[i], src + i * lds, sizeof(Vec8));
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shuffle(r[i], r[i + 1], Mask8{0, 8, 1, 9, 4, 12, 5, 13});
    t[i + 1] = __builtin_shuffle(r[i], r[i + 1], Mask8{2, 10, 3, 11, 6, 14, 7, 15});
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = __builtin_shuffle(t[i], t[i + 2], Mask8{0, 1, 8, 9, 4, 5, 12, 13});
    u[i + 1] = __builtin_shuffle(t[i], t[i + 2], Mask8{2, 3, 10, 11, 6, 7, 14, 15});
    u[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], Mask8{0, 1, 8, 9, 4, 5, 12, 13});
    u[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], Mask8{2, 3, 10, 11, 6, 7, 14, 15});
  }
  for (int i = 0; i < 4; ++i) {
    const Vec8 lo = __builtin_shuffle(u[i], u[i + 4], Mask8{0, 1, 2, 3, 8, 9, 10, 11});
    const Vec8 hi = __builtin_shuffle(u[i], u[i + 4], Mask8{4, 5, 6, 7, 12, 13, 14, 15});
    std::memcpy(dst + i * ldd, &lo, sizeof(Vec8));
    std::memcpy(dst + (i + 4) * ldd, &hi, sizeof(Vec8));
  }
}

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, bool accumulate) {
  product(m, n, k, a, {lda, 1}, b, ldb, c, ldc, accumulate);
}

void gemm_tn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
             float* c, int64_t ldc, bool accumulate) {
  product(m, n, k, a, {1, lda}, b, ldb, c, ldc, accumulate);
}

void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst) {
  int64_t r0 = 0;
  for (; r0 + 8 <= rows; r0 += 8) {
    int64_t c0 = 0;
    for (; c0 + 8 <= cols; c0 += 8) transpose8x8(src + r0 * lds + c0, lds, dst + c0 * rows + r0, rows);
    for (; c0 < cols; ++c0)
      for (int64_t r = r0; r < r0 + 8; ++r) dst[c0 * rows + r] = src[r * lds + c0];
  }
  for (; r0 < rows; ++r0)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r0] = src[r0 * lds + c];
}

}  // namespace tandem::onednn::tiles::TANDEM_TILES_LEVEL
