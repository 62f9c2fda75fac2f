// A seeded synthetic classification source for tests and benchmarks: each
// class has a random centroid, each sample is its centroid plus Gaussian
// noise, so a model can learn it and a loss must fall.
#pragma once

#include <cstdint>
#include <vector>

#include "data/dataset.hpp"

namespace tandem::host::data {

struct SyntheticSpec {
  int64_t samples = 1024;
  std::vector<int64_t> sample_shape = {16};
  int32_t classes = 4;
  double noise = 0.5;        // standard deviation around the centroid
  uint64_t seed = 0;         // fixes the class centroids
  int64_t first_sample = 0;  // samples are numbered from here: a test set drawn
                             // past the training set shares its centroids but
                             // no samples
  // > 0: token ids in [0, vocabulary) instead of real features, for models
  // that start with an embedding: each class draws most of its tokens from
  // its own 64 keywords (noise = the share drawn from the whole vocabulary).
  int64_t vocabulary = 0;
};

Dataset make_synthetic(const SyntheticSpec& spec);

}  // namespace tandem::host::data
