// oneDNN backend — the tile arithmetic of the fused attention
// (attention.cpp): small f32 matrix products on row-major tiles and a
// transpose. oneDNN 2.x has no fused attention
// and no public small-GEMM API, and a matmul primitive per 64 x 64 tile costs more to dispatch than to
// compute, so these are own loops, compiled for AVX-512, AVX2 + FMA and baseline x86-64 and picked by
// oneDNN's effective ISA (cpu_isa.hpp: ONEDNN_MAX_CPU_ISA caps them as it caps oneDNN).
#ifndef TANDEM_ONEDNN_OPS_ATTENTION_TILES_HPP
#define TANDEM_ONEDNN_OPS_ATTENTION_TILES_HPP

#include <cstdint>

namespace tandem::onednn::tiles {

// What a tile on a causal diagonal lets a product skip. Query i of the tile
// sees key j only when j <= i + shift (shift: the tile's first query minus
// its first key, plus S - T), so of a scores-shaped matrix [queries x keys]
// only a lower triangle matters:
//  - `output`: c is scores-shaped and only its entries j <= i + shift are
//    read afterwards; the others may be left unwritten (the scores, do·vᵀ);
//  - `depth`: a is scores-shaped and zero outside that triangle, so the
//    products skip those terms (p·v and ds·k; and with gemm_tn, whose a is
//    stored scores-shaped, pᵀ·do and dsᵀ·q).
// Skipping exact zeros leaves every other sum and its order as it was. At
// T = 128 (two tiles, the GPT benchmark's) the two diagonal tiles' products
// shrink by about 40 % (counting the register blocks each kind skips): a
// quarter of the attention's tile products.
enum class Triangle { none, output, depth };
struct Causal {
  Triangle kind = Triangle::none;
  int64_t shift = 0;
};

// c[m x n] (+)= a[m x k] · b[k x n]; leading dims lda, ldb, ldc (elements).
// accumulate = false overwrites c.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, bool accumulate, Causal causal = {});

// c[m x n] (+)= aᵀ · b where a is stored [k x m] (leading dim lda): the
// products with a transposed tile (dv += pᵀ·do, dk += dsᵀ·q) without a copy.
void gemm_tn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
             float* c, int64_t ldc, bool accumulate, Causal causal = {});

// dst[cols x rows] = src[rows x cols]ᵀ (src leading dim lds, dst dense).
void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst);

}  // namespace tandem::onednn::tiles

#endif  // TANDEM_ONEDNN_OPS_ATTENTION_TILES_HPP
