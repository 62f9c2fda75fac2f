// oneDNN backend — an 8 x 8 block transpose for the own GEMM's packing
// (sgemm_avx2.cpp) and the attention tiles (attention_tiles_body.hpp),
// through GCC vector shuffles: the compiler turns them into the target's
// unpacks, shuffles and 128-bit lane permutes (AVX2: vunpcklps, vshufps,
// vperm2f128), so one source serves every vector level. Element by
// element, with stores 256 bytes apart, the attention's transposes took
// 1.4 % of all samples of `perf record tandem bench
// bench/models/gpt.toml --threads 1`, a seventh of the attention's.
//
// `static`: each includer compiles its own copy for its own -march (an
// inline function with external linkage would leave the linker to pick
// one copy for all of them, an AVX-512 one for a baseline caller).
#ifndef TANDEM_ONEDNN_OPS_TRANSPOSE8X8_HPP
#define TANDEM_ONEDNN_OPS_TRANSPOSE8X8_HPP

#include <cstdint>
#include <cstring>

namespace tandem::onednn {

typedef float Row8 __attribute__((vector_size(8 * sizeof(float))));
typedef int Pick8 __attribute__((vector_size(8 * sizeof(int))));

// Row i of dst (leading dim ldd) = column i of the block of `rows` rows
// (at most 8; the missing ones read as zeros) and 8 columns at src (leading
// dim lds). The 8 rows of dst are stored in increasing order, 8 floats
// each, so with ldd < 8 a row's last lanes spill into the next row's place
// and the next row's store overwrites them; the last row's spill is the
// caller's to allow for.
static inline void transpose8x8(const float* src, int64_t lds, int64_t rows, float* dst, int64_t ldd) {
  Row8 r[8], t[8], s[8];
  for (int64_t i = 0; i < 8; ++i)
    if (i < rows)
      std::memcpy(&r[i], src + i * lds, sizeof(Row8));
    else
      r[i] = Row8{};
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shuffle(r[i], r[i + 1], Pick8{0, 8, 1, 9, 4, 12, 5, 13});
    t[i + 1] = __builtin_shuffle(r[i], r[i + 1], Pick8{2, 10, 3, 11, 6, 14, 7, 15});
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = __builtin_shuffle(t[i], t[i + 2], Pick8{0, 1, 8, 9, 4, 5, 12, 13});
    s[i + 1] = __builtin_shuffle(t[i], t[i + 2], Pick8{2, 3, 10, 11, 6, 7, 14, 15});
    s[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], Pick8{0, 1, 8, 9, 4, 5, 12, 13});
    s[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], Pick8{2, 3, 10, 11, 6, 7, 14, 15});
  }
  for (int i = 0; i < 4; ++i) {
    const Row8 low = __builtin_shuffle(s[i], s[i + 4], Pick8{0, 1, 2, 3, 8, 9, 10, 11});
    std::memcpy(dst + i * ldd, &low, sizeof low);
  }
  for (int i = 0; i < 4; ++i) {
    const Row8 high = __builtin_shuffle(s[i], s[i + 4], Pick8{4, 5, 6, 7, 12, 13, 14, 15});
    std::memcpy(dst + (i + 4) * ldd, &high, sizeof high);
  }
}

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_TRANSPOSE8X8_HPP
