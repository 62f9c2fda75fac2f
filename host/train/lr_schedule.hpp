// Learning rate as a function of the optimizer step: linear warm-up from 0,
// then constant, step decay, or cosine decay to min_lr over the run.
#pragma once

#include <cstdint>

#include "model/model_spec.hpp"

namespace tandem::host::train {

// `step` counts from 0 (the first update); `total_steps` is the run's length.
double learning_rate(const model::TrainSpec& spec, int64_t step, int64_t total_steps);

}  // namespace tandem::host::train
