// The entropy (KL-divergence) calibrator, after the method TensorRT
// describes ("8-bit Inference with TensorRT", Migacz, GTC 2017); our own
// implementation.
//
// Over the histogram of |x| (2048 bins on [0, amax]), each candidate
// threshold i (in bins) defines
//   P: the first i bins, with the mass of every bin beyond added to bin i-1
//      (clipping moves outliers to the edge);
//   Q: the first i bins merged into L quantization levels and expanded back,
//      each level's mass spread evenly over its non-empty bins;
// and the threshold minimising KL(P || Q) wins: clipping more gives finer
// steps (Q closer to P inside) but piles more mass into the edge bin.
//
// Unlike TensorRT, which histograms |x| for a symmetric s8 grid, our
// activation grid is u8 with a zero point, so the two signs are calibrated
// separately: one threshold for the positive values (255 levels when the
// data is non-negative, as after a ReLU; 128 when the data has both signs,
// each sign then owning about half of the grid) and one for the negative
// values. A symmetric threshold would let the larger side dictate the
// other's clipping: normalised images (a spike of background at -0.81,
// objects up to +2) lost every bright pixel that way.
#include <cmath>
#include <limits>

#include "quant/calibrators.hpp"

namespace tandem::host::quant {
namespace {

double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  double sp = 0, sq = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    sp += p[i];
    sq += q[i];
  }
  if (sp == 0 || sq == 0) return std::numeric_limits<double>::infinity();
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) continue;
    const double pi = p[i] / sp;
    // Q is empty where P has only the folded outliers: a tiny floor keeps the
    // divergence finite but heavily penalised.
    const double qi = std::max(q[i] / sq, 1e-12);
    kl += pi * std::log(pi / qi);
  }
  return kl;
}

// Q for threshold i: hist[0, i) merged into `levels` groups and expanded.
std::vector<double> quantized(const std::vector<double>& hist, size_t i, size_t levels) {
  std::vector<double> q(i, 0.0);
  for (size_t j = 0; j < levels; ++j) {
    const size_t begin = j * i / levels, end = (j + 1) * i / levels;
    double mass = 0;
    size_t nonzero = 0;
    for (size_t b = begin; b < end; ++b) {
      mass += hist[b];
      nonzero += hist[b] != 0 ? 1 : 0;
    }
    if (nonzero == 0) continue;
    for (size_t b = begin; b < end; ++b)
      if (hist[b] != 0) q[b] = mass / double(nonzero);
  }
  return q;
}

// The threshold (in units of the histogram's range [0, top]) of one side.
double side_threshold(const std::vector<double>& hist, double top, size_t levels) {
  const size_t n = hist.size();
  if (n == 0 || !(top > 0)) return 0;
  double tail = 0;  // mass beyond the candidate threshold
  for (size_t b = levels; b < n; ++b) tail += hist[b];
  size_t best = n;
  double best_kl = std::numeric_limits<double>::infinity();
  for (size_t i = levels; i <= n; ++i) {
    std::vector<double> p(hist.begin(), hist.begin() + std::ptrdiff_t(i));
    p[i - 1] += tail;
    const double kl = kl_divergence(p, quantized(hist, i, levels));
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
    if (i < n) tail -= hist[i];
  }
  return double(best) * top / double(n);
}

}  // namespace

Range entropy_range(const Observer& o) {
  if (o.positive_hist().empty()) return minmax_range(o);
  const bool both_signs = o.min() < 0 && o.max() > 0;
  const size_t levels = both_signs ? 128 : 255;
  Range r = minmax_range(o);
  if (o.max() > 0) r.hi = side_threshold(o.positive_hist(), o.max(), levels);
  if (o.min() < 0) r.lo = -side_threshold(o.negative_hist(), -o.min(), levels);
  return r;
}

}  // namespace tandem::host::quant
