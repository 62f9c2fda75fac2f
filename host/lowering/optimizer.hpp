// Appends the optimizer step as ordinary ops (so it is placed, planned and
// run like any other op, and can be offloaded to another device):
//   - optional clipping by global norm: the optimizer phase starts by
//     computing "optim.grad_norm_sq"; the host reads it, writes "optim.clip_coef"
//     = min(1, max_norm / (norm + 1e-6)), and every gradient is multiplied
//     by that coefficient before its update;
//   - one sgd_update or adamw_update per parameter, updating the parameter
//     and its state ("optim.<parameter>.momentum", ".m", ".v") in place.
// The learning rate is a scalar state value "optim.lr" the host writes each
// step (schedules never re-prepare kernels); AdamW's step count is "optim.step".
#pragma once

#include "lowering/model_graph.hpp"
#include "model/model_spec.hpp"

namespace tandem::host::lowering {

Result<void> append_optimizer(ModelGraph& model, const model::TrainSpec& train);

}  // namespace tandem::host::lowering
