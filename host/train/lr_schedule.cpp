#include "train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace tandem::host::train {

double learning_rate(const model::TrainSpec& s, int64_t step, int64_t total_steps) {
  if (s.warmup_steps > 0 && step < s.warmup_steps)
    return s.lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  const int64_t after = step - s.warmup_steps;
  if (s.schedule == "step") return s.lr * std::pow(s.gamma, static_cast<double>(after / s.step_size));
  if (s.schedule == "cosine") {
    const double span = static_cast<double>(std::max<int64_t>(1, total_steps - s.warmup_steps));
    const double t = std::min(1.0, static_cast<double>(after) / span);
    return s.min_lr + 0.5 * (s.lr - s.min_lr) * (1.0 + std::cos(3.141592653589793 * t));
  }
  return s.lr;
}

}  // namespace tandem::host::train
