// Per-sample transforms applied by the loader threads: normalisation and
// augmentation (random crop with padding, horizontal flip), for samples
// shaped [C, H, W] (or any shape, for normalisation).
//
// Random choices are a function of (seed, epoch, sample id), so the result is
// the same whichever thread runs the transform.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tandem::host::data {

struct Transforms {
  // y = (x - mean[c]) / std[c]; one value applies to all channels. Empty = off.
  std::vector<float> mean;
  std::vector<float> std;
  int64_t crop_padding = 0;      // random crop of the original size from a zero-padded image
  double horizontal_flip = 0.0;  // probability of a left-right flip
};

// Applies `t` in place to one sample of shape `shape`. `augment` is false for
// evaluation (normalisation only). `scratch` is reused between calls.
void apply_transforms(const Transforms& t, std::span<const int64_t> shape, std::span<float> sample,
                      bool augment, uint64_t seed, uint64_t epoch, uint64_t sample_id,
                      std::vector<float>& scratch);

}  // namespace tandem::host::data
