// The dynamic loss scale as a state machine, apart from the graph so its
// rules read in one place.
//
// Per optimizer step, given whether any gradient overflowed:
//   overflow: the step is skipped; the clean-step count restarts; the
//     hysteresis budget drops by one and, when it is spent, the scale is
//     multiplied by `backoff` (not below `min_scale`) and the budget refills.
//     Hysteresis keeps one stray inf from halving a scale that is right.
//   clean: after `growth_interval` clean steps in a row the scale is
//     multiplied by `growth` and the hysteresis budget refills.
// A fixed scale (loss_scale = <number>) only reports overflows.
#pragma once

#include <cstdint>

#include "options.hpp"

namespace amp {

class Scaler {
 public:
  explicit Scaler(const Options& options);

  struct Decision {
    bool skip = false;  // overflow: do not apply this step
    bool backed_off = false;
    bool grew = false;
    bool at_floor = false;  // overflow, and the scale is now at min_scale
    double before = 0, after = 0;
  };
  Decision update(bool overflow);
  double scale() const { return scale_; }
  // A resumed run continues from the scale its checkpoint saved.
  void resume_at(double scale) { scale_ = scale; }

 private:
  Options options_;
  double scale_;
  int64_t clean_steps_ = 0;
  int64_t hysteresis_left_;
};

}  // namespace amp
