// Counter-based random numbers for the data pipeline.
//
// Every random decision (epoch order, crop offset, flip) is a pure function of
// (seed, stream, counter), never of a generator's hidden state. That is what
// makes a run reproducible bit for bit whatever the number of loader threads,
// and what lets a resumed run continue exactly where it stopped.
#pragma once

#include <cstdint>

namespace tandem::host::data {

// SplitMix64's finaliser: a bijective 64-bit mix with good avalanche.
constexpr uint64_t mix64(uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A 64-bit value for (seed, stream, counter).
constexpr uint64_t random_u64(uint64_t seed, uint64_t stream, uint64_t counter) noexcept {
  return mix64(mix64(seed ^ mix64(stream + 0x9E3779B97F4A7C15ull)) + counter * 0x9E3779B97F4A7C15ull);
}

// Uniform in [0, 1) with 53 random bits.
constexpr double random_unit(uint64_t seed, uint64_t stream, uint64_t counter) noexcept {
  return static_cast<double>(random_u64(seed, stream, counter) >> 11) * 0x1.0p-53;
}

// Uniform integer in [0, n) (n > 0); the modulo bias is below 2^-40 for the
// sizes a data set has.
constexpr uint64_t random_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n) noexcept {
  return random_u64(seed, stream, counter) % n;
}

// Named streams, so two decisions never draw the same numbers.
enum RngStream : uint64_t {
  kShuffleStream = 1,
  kSplitStream = 2,
  kCropStream = 3,
  kFlipStream = 4,
  kSyntheticStream = 5,
  kWindowStream = 6,  // where a language model's training windows start
  kSampleStream = 7,  // `tandem generate`'s draws
};

}  // namespace tandem::host::data
