// What calibration records about one tensor (the input activation of a
// quantized layer) over the calibration batches.
//
// Two passes over the same data: the first finds the range, the second fills
// histograms over that range, because a histogram with fixed bins needs its
// bounds first (re-binning as the range grows would blur the counts). Both
// passes see identical values (the eval graph is deterministic), and the
// calibration set is small (512 samples by default), so the second pass is
// cheap.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quant/affine.hpp"

namespace tandem::host::quant {

class Observer {
 public:
  static constexpr int64_t kBins = 2048;  // as TensorRT's entropy calibrator

  // Pass 1.
  void observe_range(std::span<const float> values);
  // Call once between the passes: allocates the histograms over the range.
  void start_histograms();
  // Pass 2 (same values as pass 1).
  void observe_histograms(std::span<const float> values);

  double min() const { return min_; }
  double max() const { return max_; }
  double amax() const;  // max |x|
  int64_t count() const { return count_; }
  // Signed values over [min, max] (percentile).
  const std::vector<double>& signed_hist() const { return signed_; }
  // Magnitudes of the positive values over [0, max(max, 0)] and of the
  // negative ones over [0, max(-min, 0)] (entropy: one threshold per side).
  const std::vector<double>& positive_hist() const { return positive_; }
  const std::vector<double>& negative_hist() const { return negative_; }

 private:
  double min_ = 0, max_ = 0;
  int64_t count_ = 0;
  bool seen_ = false;
  std::vector<double> signed_, positive_, negative_;
};

}  // namespace tandem::host::quant
