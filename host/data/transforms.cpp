#include "data/transforms.hpp"

#include <algorithm>

#include "data/counter_rng.hpp"

namespace tandem::host::data {
namespace {

uint64_t draw_counter(uint64_t epoch, uint64_t sample_id, uint64_t k) {
  return (epoch << 40) ^ (sample_id << 2) ^ k;
}

void normalise(const Transforms& t, std::span<const int64_t> shape, std::span<float> x) {
  if (t.mean.empty() && t.std.empty()) return;
  const int64_t channels = shape.size() == 3 ? shape[0] : 1;
  const int64_t per_channel = static_cast<int64_t>(x.size()) / channels;
  for (int64_t c = 0; c < channels; ++c) {
    const float m = t.mean.empty() ? 0.f : t.mean[t.mean.size() == 1 ? 0 : static_cast<size_t>(c)];
    const float s = t.std.empty() ? 1.f : t.std[t.std.size() == 1 ? 0 : static_cast<size_t>(c)];
    for (int64_t i = 0; i < per_channel; ++i) {
      float& v = x[static_cast<size_t>(c * per_channel + i)];
      v = (v - m) / s;
    }
  }
}

// Crops an H×W window at (dy, dx) from the image zero-padded by `pad`.
void crop(std::span<const int64_t> shape, std::span<float> x, int64_t pad, int64_t dy, int64_t dx,
          std::vector<float>& scratch) {
  const int64_t C = shape[0], H = shape[1], W = shape[2];
  scratch.assign(x.begin(), x.end());
  for (int64_t c = 0; c < C; ++c)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) {
        const int64_t sh = h + dy - pad, sw = w + dx - pad;
        const bool inside = sh >= 0 && sh < H && sw >= 0 && sw < W;
        x[static_cast<size_t>((c * H + h) * W + w)] =
            inside ? scratch[static_cast<size_t>((c * H + sh) * W + sw)] : 0.f;
      }
}

void flip(std::span<const int64_t> shape, std::span<float> x) {
  const int64_t rows = shape[0] * shape[1], W = shape[2];
  for (int64_t r = 0; r < rows; ++r) std::reverse(x.begin() + r * W, x.begin() + (r + 1) * W);
}

}  // namespace

void apply_transforms(const Transforms& t, std::span<const int64_t> shape, std::span<float> sample,
                      bool augment, uint64_t seed, uint64_t epoch, uint64_t sample_id,
                      std::vector<float>& scratch) {
  // Augment before normalising, so zero padding means "black", as in torchvision.
  if (augment && shape.size() == 3) {
    if (t.crop_padding > 0) {
      const uint64_t range = static_cast<uint64_t>(2 * t.crop_padding + 1);
      const auto dy =
          static_cast<int64_t>(random_below(seed, kCropStream, draw_counter(epoch, sample_id, 0), range));
      const auto dx =
          static_cast<int64_t>(random_below(seed, kCropStream, draw_counter(epoch, sample_id, 1), range));
      crop(shape, sample, t.crop_padding, dy, dx, scratch);
    }
    if (t.horizontal_flip > 0.0 &&
        random_unit(seed, kFlipStream, draw_counter(epoch, sample_id, 2)) < t.horizontal_flip)
      flip(shape, sample);
  }
  normalise(t, shape, sample);
}

}  // namespace tandem::host::data
