#include "data/dataset.hpp"

#include <algorithm>

namespace tandem::host::data {

std::array<float, 256> scaled_bytes(double divisor) {
  std::array<float, 256> table{};
  for (size_t b = 0; b < table.size(); ++b) table[b] = static_cast<float>(double(b) / divisor);
  return table;
}

void Dataset::copy_sample(int64_t i, float* dst) const noexcept {
  const size_t numel = static_cast<size_t>(sample_numel()), at = static_cast<size_t>(i) * numel;
  if (!pixels.empty()) {
    for (size_t j = 0; j < numel; ++j) dst[j] = pixel_value[pixels[at + j]];
  } else {
    std::copy_n(features.data() + at, numel, dst);
  }
}

float Dataset::value(int64_t i, int64_t j) const noexcept {
  const size_t at = static_cast<size_t>(i * sample_numel() + j);
  return pixels.empty() ? features[at] : pixel_value[pixels[at]];
}

Dataset select(const Dataset& from, const std::vector<int64_t>& positions, const std::string& source) {
  Dataset out;
  out.source = source;
  out.labels_source = from.labels_source;
  out.sample_shape = from.sample_shape;
  out.num_classes = from.num_classes;
  out.pixel_value = from.pixel_value;
  const size_t numel = static_cast<size_t>(from.sample_numel());
  auto copy_rows = [&](const auto& rows, auto& into) {
    if (rows.empty()) return;
    into.resize(positions.size() * numel);
    for (size_t i = 0; i < positions.size(); ++i)
      std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>(size_t(positions[i]) * numel), numel,
                  into.begin() + static_cast<std::ptrdiff_t>(i * numel));
  };
  copy_rows(from.features, out.features);
  copy_rows(from.pixels, out.pixels);
  out.labels.resize(positions.size());
  for (size_t i = 0; i < positions.size(); ++i)
    out.labels[i] = from.labels[static_cast<size_t>(positions[i])];
  return out;
}

}  // namespace tandem::host::data
