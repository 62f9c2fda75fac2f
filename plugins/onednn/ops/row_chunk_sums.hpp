// oneDNN backend — the parameter gradients of a row-wise normalisation
// (layer_norm's dgamma and dbeta, rms_norm's dgamma): sums over every row,
// taken in the same pass as dx rather than in a second pass over dy and x.
// Each chunk of rows sums its own partial into the workspace; the partials
// are then added in chunk order. The chunks depend on the row count only
// (at least 64 rows, at most 256 chunks), so the sums are the same bits on
// any number of threads.
//
// Why: a second pass in column blocks, in baseline code, took more of the
// GPT benchmark's layer_norm_grad than the rows themselves; rms_norm_grad's
// second pass, a column at a time over every row, took 29-36 ms of a step
// of bench/models/llama.toml on 1 thread, against 4.7-6.2 in one pass
// (`tandem bench --profile`, the two plugins alternating).
#ifndef TANDEM_ONEDNN_OPS_ROW_CHUNK_SUMS_HPP
#define TANDEM_ONEDNN_OPS_ROW_CHUNK_SUMS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tandem::onednn {

class RowChunks {
 public:
  explicit RowChunks(int64_t rows)
      : rows_(rows), each_(std::max<int64_t>(64, (rows + 255) / 256)), count_((rows + each_ - 1) / each_) {}

  int64_t count() const { return count_; }
  int64_t begin(int64_t chunk) const { return chunk * each_; }
  int64_t end(int64_t chunk) const { return std::min(rows_, (chunk + 1) * each_); }

  // Floats of the partial sums of `width` values a chunk.
  size_t partial_floats(int64_t width) const { return size_t(count_) * size_t(width); }

  // store(i, Σ_chunks partials[chunk·width + i]) for i < width, the chunks
  // in order, f32. Inside the parallel region, after the chunks' own `omp
  // for` (whose implicit barrier has every partial written); shares the i
  // among the region's threads.
  template <class Store>
  void add_in_order(const float* partials, int64_t width, const Store& store) const {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < width; ++i) {
      float sum = 0;
      for (int64_t c = 0; c < count_; ++c) sum += partials[c * width + i];
      store(i, sum);
    }
  }

 private:
  int64_t rows_, each_, count_;
};

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_OPS_ROW_CHUNK_SUMS_HPP
