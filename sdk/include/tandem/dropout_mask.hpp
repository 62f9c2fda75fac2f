// Tandem SDK — the catalog's counter-based dropout mask (sdk/ops.md,
// "dropout"), part of the header-only C++ helper.
//
// Element i of a mask drawn with seed s is kept iff dropout_uniform(s, i) >= p.
// The value depends on (s, i) only, not on the order or the thread that asks,
// so every backend, every tiling and every rerun draw the same bits; the
// dropout op and attention's dropout on its probabilities (whose element i
// is the flat index into [B, H, T, S]) use it alike. Usable in CUDA device
// code (TANDEM_HOST_DEVICE, from tandem/half.hpp).
#ifndef TANDEM_DROPOUT_MASK_HPP
#define TANDEM_DROPOUT_MASK_HPP

#include <cstdint>

#include "tandem/half.hpp"

namespace tandem {

// u in [0, 1) for element i: the top 24 bits of SplitMix64's finaliser of
// seed + (i + 1)·golden_gamma, in uint64 arithmetic that wraps. 24 bits so
// that f32 holds u exactly and every backend compares the same number.
TANDEM_HOST_DEVICE inline float dropout_uniform(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return static_cast<float>(z >> 40) * 0x1p-24f;
}

// Whether element i is kept at drop probability p (p = 0 keeps everything,
// p = 1 drops everything: u < 1 always).
TANDEM_HOST_DEVICE inline bool dropout_keep(uint64_t seed, uint64_t i, float p) {
  return p == 0.0f || dropout_uniform(seed, i) >= p;
}

}  // namespace tandem

#endif  // TANDEM_DROPOUT_MASK_HPP
