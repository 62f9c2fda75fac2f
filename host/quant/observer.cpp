#include "quant/observer.hpp"

#include <algorithm>
#include <cmath>

namespace tandem::host::quant {

void Observer::observe_range(std::span<const float> values) {
  for (float v : values) {
    if (!std::isfinite(v)) continue;  // an inf/NaN activation would make every scale useless
    if (!seen_) {
      min_ = max_ = v;
      seen_ = true;
    }
    min_ = std::min(min_, double(v));
    max_ = std::max(max_, double(v));
  }
  count_ += int64_t(values.size());
}

double Observer::amax() const {
  return std::max(std::fabs(min_), std::fabs(max_));
}

void Observer::start_histograms() {
  signed_.assign(size_t(kBins), 0.0);
  positive_.assign(size_t(kBins), 0.0);
  negative_.assign(size_t(kBins), 0.0);
}

namespace {
// Bin of v in [lo, hi] split into kBins; the top edge goes to the last bin.
size_t bin_of(double v, double lo, double hi) {
  if (!(hi > lo)) return 0;
  const double t = (v - lo) / (hi - lo) * double(Observer::kBins);
  return size_t(std::clamp(t, 0.0, double(Observer::kBins - 1)));
}
}  // namespace

void Observer::observe_histograms(std::span<const float> values) {
  for (float v : values) {
    if (!std::isfinite(v)) continue;
    signed_[bin_of(v, min_, max_)] += 1;
    if (v > 0) positive_[bin_of(v, 0.0, max_)] += 1;
    if (v < 0) negative_[bin_of(-double(v), 0.0, -min_)] += 1;
  }
}

}  // namespace tandem::host::quant
