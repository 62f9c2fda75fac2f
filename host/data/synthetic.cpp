#include "data/synthetic.hpp"

#include <algorithm>
#include <cmath>

#include "data/counter_rng.hpp"

namespace tandem::host::data {
namespace {

// Standard normal from two uniforms (Box-Muller), counter-based.
double normal(uint64_t seed, uint64_t counter) {
  const double u1 = 1.0 - random_unit(seed, kSyntheticStream, 2 * counter);
  const double u2 = random_unit(seed, kSyntheticStream, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace

Dataset make_synthetic(const SyntheticSpec& spec) {
  Dataset set;
  set.source = "synthetic(seed=" + std::to_string(spec.seed) + ")";
  set.sample_shape = spec.sample_shape;
  set.num_classes = spec.classes;
  const int64_t numel = set.sample_numel();
  // Centroids draw from the top of the counter range, samples from the bottom,
  // so the two never share draws.
  const uint64_t centroid_base = uint64_t{1} << 62;
  set.features.resize(static_cast<size_t>(spec.samples * numel));
  set.labels.resize(static_cast<size_t>(spec.samples));
  for (int64_t i = 0; i < spec.samples; ++i) {
    const auto id = static_cast<uint64_t>(spec.first_sample + i);
    const int32_t label = static_cast<int32_t>(
        random_below(spec.seed, kSyntheticStream, ~id, static_cast<uint64_t>(spec.classes)));
    set.labels[static_cast<size_t>(i)] = label;
    if (spec.vocabulary > 0) {
      const auto v = static_cast<uint64_t>(spec.vocabulary), c = static_cast<uint64_t>(spec.classes);
      // A class's "keywords": the first 64 ids of its slice (fewer when the
      // vocabulary is small), so a table that sees them often can learn them.
      const uint64_t slice = std::max<uint64_t>(1, std::min<uint64_t>(64, v / c)),
                     stride = std::max<uint64_t>(1, v / c);
      for (int64_t j = 0; j < numel; ++j) {
        const uint64_t k = id * static_cast<uint64_t>(numel) + static_cast<uint64_t>(j);
        const bool anywhere = random_unit(spec.seed, kSyntheticStream, 3 * k) < std::min(1.0, spec.noise);
        const uint64_t token =
            anywhere ? random_below(spec.seed, kSyntheticStream, 3 * k + 1, v)
                     : std::min(v - 1, static_cast<uint64_t>(label) * stride +
                                           random_below(spec.seed, kSyntheticStream, 3 * k + 2, slice));
        set.features[static_cast<size_t>(i * numel + j)] = static_cast<float>(token);
      }
      continue;
    }
    for (int64_t j = 0; j < numel; ++j) {
      const double centroid = normal(spec.seed, centroid_base + static_cast<uint64_t>(label * numel + j));
      set.features[static_cast<size_t>(i * numel + j)] =
          static_cast<float>(centroid + spec.noise * normal(spec.seed, id * static_cast<uint64_t>(numel) +
                                                                           static_cast<uint64_t>(j)));
    }
  }
  return set;
}

}  // namespace tandem::host::data
