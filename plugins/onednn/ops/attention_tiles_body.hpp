// oneDNN backend — the loops of attention_tiles.hpp, compiled once per
// vector level: attention_tiles.cpp includes this file for the baseline,
// attention_tiles_avx2.cpp and attention_tiles_avx512.cpp with their -march
// (plugins/onednn/CMakeLists.txt), each into namespace
// tiles::TANDEM_TILES_LEVEL. Plain loops the compiler vectorises for the
// target it compiles for; no intrinsics, so one source serves every level.
// Included by those three files only, hence no include guard.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "attention_tiles.hpp"
#include "transpose8x8.hpp"

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

template <class V = Vec>
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
inline void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}
// x in every lane: one broadcast from memory (Vec{} + x would add +0.0 first,
// an extra instruction on the adder per row and step, as -0.0 + 0.0 is not -0.0).
inline Vec splat(float x) {
  return x - Vec{};
}

// Where a(r, p) lives: a[r * row + p * col] (row-major a: col = 1; a stored
// transposed: row = 1, and `transposed` says so).
struct Strides {
  int64_t row, col;
  bool transposed;
};

// What rows [i, i + rows) of c need under a causal triangle
// (attention_tiles.hpp): the columns below n_end and the depth
// [k_begin, k_end). With a transposed, a(r, p) is zero where r > p + shift.
struct Span {
  int64_t n_end, k_begin, k_end;
};
inline Span span_of(const Causal& z, bool a_transposed, int64_t i, int64_t rows, int64_t n, int64_t k) {
  const int64_t reach = i + rows + z.shift;  // one past the last key the block's last row sees
  if (z.kind == Triangle::output) return {std::clamp<int64_t>(reach, 0, n), 0, k};
  if (z.kind == Triangle::depth)
    return a_transposed ? Span{n, std::clamp<int64_t>(i - z.shift, 0, k), k}
                        : Span{n, 0, std::clamp<int64_t>(reach, 0, k)};
  return {n, 0, k};
}

// R full-width rows of c from the depth [k0, k1).
template <int64_t R>
inline void full_block(int64_t k0, int64_t k1, const float* a, Strides as, const float* b, int64_t ldb,
                       float* c, int64_t ldc, bool accumulate) {
  Vec acc[R][2];
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < 2; ++h) acc[r][h] = accumulate ? load(c + r * ldc + h * kLanes) : Vec{};
  for (int64_t p = k0; p < k1; ++p) {
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
inline void tail_row(int64_t k0, int64_t k1, const float* a, Strides as, const float* b, int64_t ldb,
                     float* c, int64_t cols, bool accumulate) {
  float acc[kCols];
  for (int64_t j = 0; j < cols; ++j) acc[j] = accumulate ? c[j] : 0.f;
  for (int64_t p = k0; p < k1; ++p) {
    const float ar = a[p * as.col];
    for (int64_t j = 0; j < cols; ++j) acc[j] += ar * b[p * ldb + j];
  }
  for (int64_t j = 0; j < cols; ++j) c[j] = acc[j];
}

// Rows [i, i + R) of the column block j, or nothing where the triangle
// leaves it unread.
template <int64_t R>
inline void row_block(int64_t i, int64_t j, int64_t n, int64_t k, const float* a, Strides as, const float* b,
                      int64_t ldb, float* c, int64_t ldc, bool accumulate, const Causal& z) {
  const Span s = span_of(z, as.transposed, i, R, n, k);
  if (j < s.n_end)
    full_block<R>(s.k_begin, s.k_end, a + i * as.row, as, b + j, ldb, c + i * ldc + j, ldc, accumulate);
}

void product(int64_t m, int64_t n, int64_t k, const float* a, Strides as, const float* b, int64_t ldb,
             float* c, int64_t ldc, bool accumulate, const Causal& z) {
  for (int64_t j = 0; j < n; j += kCols) {
    if (n - j < kCols) {
      for (int64_t i = 0; i < m; ++i) {
        const Span s = span_of(z, as.transposed, i, 1, n, k);
        if (j < s.n_end)
          tail_row(s.k_begin, s.k_end, a + i * as.row, as, b + j, ldb, c + i * ldc + j, n - j, accumulate);
      }
      break;
    }
    int64_t i = 0;
    for (; i + kRows <= m; i += kRows) row_block<kRows>(i, j, n, k, a, as, b, ldb, c, ldc, accumulate, z);
    if constexpr (kRows > 4)
      for (; i + 4 <= m; i += 4) row_block<4>(i, j, n, k, a, as, b, ldb, c, ldc, accumulate, z);
    for (; i < m; ++i) row_block<1>(i, j, n, k, a, as, b, ldb, c, ldc, accumulate, z);
  }
}

}  // namespace

void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst) {
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8) transpose8x8(src + r * lds + c, lds, 8, dst + c * rows + r, rows);
  // The edges a whole block does not cover, element by element.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = r < r8 ? c8 : 0; c < cols; ++c) dst[c * rows + r] = src[r * lds + c];
}

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, bool accumulate, Causal causal) {
  product(m, n, k, a, {lda, 1, false}, b, ldb, c, ldc, accumulate, causal);
}

void gemm_tn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
             float* c, int64_t ldc, bool accumulate, Causal causal) {
  product(m, n, k, a, {1, lda, true}, b, ldb, c, ldc, accumulate, causal);
}

}  // namespace tandem::onednn::tiles::TANDEM_TILES_LEVEL
