#include "scaler.hpp"

#include <algorithm>

namespace amp {

Scaler::Scaler(const Options& options)
    : options_(options), scale_(options.initial_scale), hysteresis_left_(options.hysteresis) {}

Scaler::Decision Scaler::update(bool overflow) {
  Decision d;
  d.before = d.after = scale_;
  if (options_.scaling != Scaling::Dynamic) {
    d.skip = overflow;
    return d;
  }
  if (overflow) {
    d.skip = true;
    clean_steps_ = 0;
    if (--hysteresis_left_ <= 0) {
      hysteresis_left_ = options_.hysteresis;
      scale_ = std::max(scale_ * options_.backoff, options_.min_scale);
      d.backed_off = scale_ < d.before;
    }
    // Still overflowing with no lower scale left to try (the back-off clamps
    // to min_scale exactly, so equality is the test).
    d.at_floor = scale_ <= options_.min_scale;
  } else if (++clean_steps_ >= options_.growth_interval) {
    clean_steps_ = 0;
    hysteresis_left_ = options_.hysteresis;
    scale_ *= options_.growth;
    d.grew = true;
  }
  d.after = scale_;
  return d;
}

}  // namespace amp
