#include "quant/calibrators.hpp"

#include <algorithm>

namespace tandem::host::quant {

Result<Method> parse_method(const std::string& name) {
  if (name == "minmax") return Method::MinMax;
  if (name == "percentile") return Method::Percentile;
  if (name == "entropy") return Method::Entropy;
  return make_error("--calibrator " + name + ": unknown calibrator (expected minmax, percentile or entropy)",
                    TDM_INVALID_ARGUMENT);
}

const char* method_name(Method m) {
  switch (m) {
    case Method::MinMax:
      return "minmax";
    case Method::Percentile:
      return "percentile";
    case Method::Entropy:
      return "entropy";
  }
  return "?";
}

bool needs_histograms(Method m) {
  return m != Method::MinMax;
}

Range minmax_range(const Observer& o) {
  return {o.min(), o.max()};
}

Range percentile_range(const Observer& o, double percentile) {
  const std::vector<double>& h = o.signed_hist();
  double total = 0;
  for (double c : h) total += c;
  if (total == 0 || h.empty() || !(o.max() > o.min())) return minmax_range(o);
  // Data of one sign has one tail to clip; signed data splits the excluded
  // share between its two tails.
  const bool two_tails = o.min() < 0 && o.max() > 0;
  const double excluded = (100.0 - std::clamp(percentile, 0.0, 100.0)) / 100.0 * total;
  const double tail = two_tails ? excluded / 2 : excluded;
  const double width = (o.max() - o.min()) / double(h.size());
  Range r = minmax_range(o);
  // Upper bound: the upper edge of the bin where the count from the top
  // first exceeds the tail.
  double above = 0;
  for (size_t i = h.size(); i-- > 0;) {
    above += h[i];
    if (above > tail) {
      r.hi = o.min() + double(i + 1) * width;
      break;
    }
  }
  if (two_tails || o.max() <= 0) {
    double below = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      below += h[i];
      if (below > tail) {
        r.lo = o.min() + double(i) * width;
        break;
      }
    }
  }
  if (o.max() <= 0) r.hi = o.max();  // all-negative data: only the lower tail exists
  return {std::max(r.lo, o.min()), std::min(r.hi, o.max())};
}

Range calibrate(const Observer& o, Method m, double percentile) {
  switch (m) {
    case Method::MinMax:
      return minmax_range(o);
    case Method::Percentile:
      return percentile_range(o, percentile);
    case Method::Entropy:
      return entropy_range(o);
  }
  return minmax_range(o);
}

}  // namespace tandem::host::quant
