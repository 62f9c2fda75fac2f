// Seeded permutations and the train/validation split.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "data/dataset.hpp"

namespace tandem::host::data {

// A permutation of [0, n) that depends only on (seed, stream, epoch):
// Fisher-Yates with counter-based draws.
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t stream, uint64_t epoch);

// Holds out round(fraction * size) samples, chosen by `seed`, as validation.
// Both parts keep the original relative order of their samples.
std::pair<Dataset, Dataset> split_validation(const Dataset& all, double fraction, uint64_t seed);

}  // namespace tandem::host::data
