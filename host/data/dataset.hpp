// An in-memory labelled data set: what every reader produces and the loader
// consumes. Features are f32, one contiguous row per sample, in the sample
// shape (e.g. [1, 28, 28] for an MNIST image); labels are class indices.
// A language model's data set is a token stream instead (token_stream.hpp):
// its samples are windows of context + 1 tokens, kept in the stored width.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/token_stream.hpp"

namespace tandem::host::data {

// The largest class index a data file may hold. A label beyond it is a
// damaged file or a column that is not the label, and bounding it keeps
// num_classes (largest label + 1) and the casts to int32 well defined.
inline constexpr int32_t kMaxLabel = 1'000'000;

struct Dataset {
  std::string source;                 // file or generator it came from, for messages
  std::string labels_source;          // where the labels came from (IDX: a file of their own)
  std::vector<int64_t> sample_shape;  // shape of one sample, without the batch dim
  std::vector<float> features;        // size() * sample_numel() values
  std::vector<int32_t> labels;        // size() entries
  int32_t num_classes = 0;
  // Token data (features and labels empty): `windows` samples per epoch, each
  // `context` tokens and the `context` tokens after them; random starts
  // (training) or consecutive non-overlapping windows (evaluation).
  std::shared_ptr<const TokenStream> tokens;
  int64_t context = 0;
  int64_t windows = 0;
  bool random_windows = true;

  int64_t size() const noexcept { return tokens ? windows : static_cast<int64_t>(labels.size()); }
  int64_t sample_numel() const noexcept {
    int64_t n = 1;
    for (int64_t d : sample_shape) n *= d;
    return n;
  }
  const float* sample(int64_t i) const noexcept { return features.data() + i * sample_numel(); }
};

// Keeps the samples whose positions are listed, in that order.
Dataset select(const Dataset& from, const std::vector<int64_t>& positions, const std::string& source);

}  // namespace tandem::host::data
