// An in-memory labelled data set: what every reader produces and the loader
// consumes. One contiguous row per sample, in the sample shape (e.g.
// [1, 28, 28] for an MNIST image), kept in the dtype the file stores it in:
// u8 images stay bytes (a quarter of their f32 size; Fashion-MNIST's 47 MB,
// not 188), widened to f32 per batch by the loader threads; CSV and
// synthetic features are f32. Labels are class indices.
// A language model's data set is a token stream instead (token_stream.hpp):
// its samples are windows of context + 1 tokens, kept in the stored width.
#pragma once

#include <array>
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
  // Exactly one of these holds the samples, size() * sample_numel() each:
  std::vector<float> features;  // f32 values
  std::vector<uint8_t> pixels;  // u8 values; element b is pixel_value[b]
  std::array<float, 256> pixel_value{};
  std::vector<int32_t> labels;  // size() entries
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
  // Sample i as f32, sample_numel() values into `dst`.
  void copy_sample(int64_t i, float* dst) const noexcept;
  // Element `j` of sample `i` as f32.
  float value(int64_t i, int64_t j) const noexcept;
};

// pixel_value for u8 data scaled by 1/`divisor` (255 for [0, 1] images), each
// entry the f32 nearest to b / divisor.
std::array<float, 256> scaled_bytes(double divisor);

// Keeps the samples whose positions are listed, in that order.
Dataset select(const Dataset& from, const std::vector<int64_t>& positions, const std::string& source);

}  // namespace tandem::host::data
