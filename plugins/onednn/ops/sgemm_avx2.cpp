// oneDNN backend — the AVX2 + FMA code of the own GEMM (sgemm.hpp): packing
// and the 6 x 16 register block. Compiled with -march=haswell
// (plugins/onednn/CMakeLists.txt) and called only when oneDNN's effective ISA
// is AVX2 + FMA (sgemm.cpp). Intrinsics for the register block and the
// masked loads and stores; the packing transposes are transpose8x8.hpp's.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "sgemm.hpp"
#include "transpose8x8.hpp"

namespace tandem::onednn::sgemm::avx2 {

namespace {

// Packing reads rows lda (or ldb) apart, which the hardware prefetchers
// follow poorly when the operand comes from memory (a weight gradient's dy
// and x): asking for the row kPrefetchRows ahead hides most of the wait.
constexpr int64_t kPrefetchRows = 8;
inline void prefetch_row(const float* row, int64_t floats) {
  for (int64_t i = 0; i < floats; i += 16) _mm_prefetch(reinterpret_cast<const char*>(row + i), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(row + floats - 1), _MM_HINT_T0);
}

// A mask of the lanes below n (n <= 8).
inline __m256i lanes_below(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// sums[i] += row[i] for i < n, 8 at a time while they last.
inline void add_row(const float* row, int64_t n, float* sums) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(sums + i, _mm256_add_ps(_mm256_loadu_ps(sums + i), _mm256_loadu_ps(row + i)));
  for (; i < n; ++i) sums[i] += row[i];
}

// A's rows [i0, i0 + mc) x depth [k0, k0 + kc) as micro-panels: per kMr
// rows, kc steps of kMr values; rows past mc are zeros. Writes up to 2
// floats past the panels (pa has 8 to spare). With row_sums (a stored
// transposed only), also adds the block's steps to row_sums[i0 + i], in
// increasing depth and from 0 at depth 0: a weight gradient's dbias from the
// rows of dy that packing reads anyway, rather than a pass of its own.
void pack_a(const Problem& p, const float* a, int64_t i0, int64_t mc, int64_t k0, int64_t kc, float* pa,
            float* row_sums) {
  const int64_t lda = p.a_transposed ? p.m : p.k;
  if (p.a_transposed) {
    alignas(32) float sums[kMc];
    if (row_sums != nullptr) {
      if (k0 == 0)
        std::fill(sums, sums + mc, 0.f);
      else
        std::memcpy(sums, row_sums + i0, size_t(mc) * sizeof(float));
    }
    // a(i, q) = a[q·lda + i]: row q of the stored a holds step q of every
    // panel. Read each such row once, in order, and deal it out: panel by
    // panel, the 6 values of a step come from rows lda apart, and with 4 KiB
    // rows (a 1024-wide layer's dy) all of them fall in one L1 set, so a
    // line is evicted before the next panel reads the rest of it. One
    // 8-wide load and store a panel and step: the 2 lanes past the step land
    // in the next step's place, overwritten when it is stored, so the last
    // step stores only its 6 lanes.
    const int64_t rows_left = p.m - i0;
    for (int64_t q = 0; q < kc; ++q) {
      const float* src = a + (k0 + q) * lda + i0;
      prefetch_row(src + kPrefetchRows * lda, mc);
      for (int64_t ir = 0; ir < mc; ir += kMr) {
        const int64_t mr = std::min(kMr, mc - ir);
        float* dst = pa + ir * kc + q * kMr;
        const __m256 v = mr == kMr && ir + 8 <= rows_left ? _mm256_loadu_ps(src + ir)
                                                          : _mm256_maskload_ps(src + ir, lanes_below(mr));
        if (q + 1 < kc)
          _mm256_storeu_ps(dst, v);
        else
          _mm256_maskstore_ps(dst, lanes_below(kMr), v);
      }
      if (row_sums != nullptr) add_row(src, mc, sums);
    }
    if (row_sums != nullptr) std::memcpy(row_sums + i0, sums, size_t(mc) * sizeof(float));
    return;
  }
  for (int64_t ir = 0; ir < mc; ir += kMr, pa += kMr * kc) {
    const int64_t mr = std::min(kMr, mc - ir);
    const float* rows = a + (i0 + ir) * lda + k0;
    int64_t q = 0;
    // 8 steps at a time: the panel's rows transposed, 6 lanes a step.
    for (; q + 8 <= kc; q += 8) transpose8x8(rows + q, lda, mr, pa + q * kMr, kMr);
    for (; q < kc; ++q)
      for (int64_t i = 0; i < kMr; ++i) pa[q * kMr + i] = i < mr ? rows[i * lda + q] : 0.f;
  }
}

// B's depth [k0, k0 + kc) x columns [j0, j0 + nc) as micro-panels: per kNr
// columns, kc steps of kNr values; columns past nc are zeros.
void pack_b(const Problem& p, const float* b, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* pb) {
  const int64_t ldb = p.b_transposed ? p.k : p.n;
  const int64_t full = p.b_transposed ? 0 : nc / kNr * kNr;  // the columns packed row by row
  if (full > 0) {
    // Row q of b holds step q of every panel: read it once, in order, and deal it out.
    for (int64_t q = 0; q < kc; ++q) {
      const float* src = b + (k0 + q) * ldb + j0;
      prefetch_row(src + kPrefetchRows * ldb, full);
      for (int64_t jr = 0; jr < full; jr += kNr) {
        float* dst = pb + jr * kc + q * kNr;
        _mm256_storeu_ps(dst, _mm256_loadu_ps(src + jr));
        _mm256_storeu_ps(dst + 8, _mm256_loadu_ps(src + jr + 8));
      }
    }
  }
  for (int64_t jr = full; jr < nc; jr += kNr) {
    float* panel = pb + jr * kc;
    const int64_t nr = std::min(kNr, nc - jr), j = j0 + jr;
    int64_t q = 0;
    if (nr == kNr) {  // b(q, j) = b[j·ldb + q]: rows of b are columns of the panel
      for (; q + 8 <= kc; q += 8) {
        transpose8x8(b + j * ldb + k0 + q, ldb, 8, panel + q * kNr, kNr);
        transpose8x8(b + (j + 8) * ldb + k0 + q, ldb, 8, panel + q * kNr + 8, kNr);
      }
    }
    for (; q < kc; ++q)
      for (int64_t c = 0; c < kNr; ++c)
        panel[q * kNr + c] = c >= nr          ? 0.f
                             : p.b_transposed ? b[(j + c) * ldb + k0 + q]
                                              : b[(k0 + q) * ldb + j + c];
  }
}

// What a block does with its sums: continue the ones stored by the previous
// k block (else start from 0), and on the last k block add the bias (16
// values from the block's first column) and apply relu.
struct Finish {
  bool continue_stored = false;
  const float* bias = nullptr;
  bool relu = false;
};

// c[6 x 16] from kc steps of the packed panels.
inline void block(int64_t kc, const float* pa, const float* pb, float* c, int64_t ldc, const Finish& f) {
  __m256 acc[kMr][2];
  for (int64_t i = 0; i < kMr; ++i)
    for (int64_t h = 0; h < 2; ++h)
      acc[i][h] = f.continue_stored ? _mm256_loadu_ps(c + i * ldc + 8 * h) : _mm256_setzero_ps();
  for (int64_t q = 0; q < kc; ++q, pa += kMr, pb += kNr) {
    const __m256 b0 = _mm256_loadu_ps(pb), b1 = _mm256_loadu_ps(pb + 8);
    for (int64_t i = 0; i < kMr; ++i) {
      const __m256 ai = _mm256_broadcast_ss(pa + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  for (int64_t h = 0; h < 2; ++h) {
    const __m256 bias = f.bias ? _mm256_loadu_ps(f.bias + 8 * h) : _mm256_setzero_ps();
    for (int64_t i = 0; i < kMr; ++i) {
      __m256 v = acc[i][h];
      if (f.bias) v = _mm256_add_ps(v, bias);
      // max(0, v) returns v when v is NaN: relu keeps a NaN, as the catalog's x > 0 ? x : 0 would not hide
      // it.
      if (f.relu) v = _mm256_max_ps(_mm256_setzero_ps(), v);
      _mm256_storeu_ps(c + i * ldc + 8 * h, v);
    }
  }
}

// A block of c with fewer than 6 rows or 16 columns: through a full-size
// copy, so the sums are the same as in a full block.
void edge_block(int64_t kc, const float* pa, const float* pb, float* c, int64_t ldc, int64_t mr, int64_t nr,
                Finish f) {
  alignas(32) float tile[kMr * kNr] = {};
  alignas(32) float bias[kNr] = {};
  if (f.continue_stored)
    for (int64_t i = 0; i < mr; ++i) std::memcpy(tile + i * kNr, c + i * ldc, size_t(nr) * sizeof(float));
  if (f.bias) {
    std::memcpy(bias, f.bias, size_t(nr) * sizeof(float));
    f.bias = bias;
  }
  block(kc, pa, pb, tile, kNr, f);
  for (int64_t i = 0; i < mr; ++i) std::memcpy(c + i * ldc, tile + i * kNr, size_t(nr) * sizeof(float));
}

}  // namespace

void rectangle(const Problem& p, const float* a, const float* b, const float* bias, float* c, float* row_sums,
               int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* pa, float* pb) {
  for (int64_t jc = n0; jc < n1; jc += kNc) {
    const int64_t nc = std::min(kNc, n1 - jc);
    for (int64_t pc = 0; pc < p.k; pc += kKc) {
      const int64_t kc = std::min(kKc, p.k - pc);
      const bool last = pc + kc == p.k;
      pack_b(p, b, pc, kc, jc, nc, pb);
      for (int64_t ic = m0; ic < m1; ic += kMc) {
        const int64_t mc = std::min(kMc, m1 - ic);
        // The sums once, with the first column block.
        pack_a(p, a, ic, mc, pc, kc, pa, jc == n0 ? row_sums : nullptr);
        for (int64_t jr = 0; jr < nc; jr += kNr) {
          const int64_t nr = std::min(kNr, nc - jr), j = jc + jr;
          const Finish f{pc > 0 || p.accumulate, last && p.bias ? bias + j : nullptr, last && p.relu};
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            const int64_t mr = std::min(kMr, mc - ir);
            float* cb = c + (ic + ir) * p.n + j;
            if (mr == kMr && nr == kNr)
              block(kc, pa + ir * kc, pb + jr * kc, cb, p.n, f);
            else
              edge_block(kc, pa + ir * kc, pb + jr * kc, cb, p.n, mr, nr, f);
          }
        }
      }
    }
  }
}

}  // namespace tandem::onednn::sgemm::avx2
