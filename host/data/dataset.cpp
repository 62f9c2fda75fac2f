#include "data/dataset.hpp"

#include <algorithm>

namespace tandem::host::data {

Dataset select(const Dataset& from, const std::vector<int64_t>& positions, const std::string& source) {
  Dataset out;
  out.source = source;
  out.labels_source = from.labels_source;
  out.sample_shape = from.sample_shape;
  out.num_classes = from.num_classes;
  const int64_t numel = from.sample_numel();
  out.features.resize(positions.size() * static_cast<size_t>(numel));
  out.labels.resize(positions.size());
  for (size_t i = 0; i < positions.size(); ++i) {
    const float* src = from.sample(positions[i]);
    std::copy(src, src + numel, out.features.begin() + static_cast<std::ptrdiff_t>(i * numel));
    out.labels[i] = from.labels[static_cast<size_t>(positions[i])];
  }
  return out;
}

}  // namespace tandem::host::data
