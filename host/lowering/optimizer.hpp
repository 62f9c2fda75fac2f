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
//
// ZeRO (ModelGraph::zero over the data-parallel ranks; as DeepSpeed's ZeRO
// and PyTorch's FSDP2, each parameter sharded flat on its own): every rank
// updates one shard of every parameter and holds the optimizer state of
// that shard only; the updated shards are then gathered into every rank's
// whole parameter (zero.gather). Stage 1 shards the gradients the host has
// averaged (zero.shard); stage 2 averages each gradient straight into this
// rank's shard (zero.reduce_scatter) as soon as backward has finished it,
// so the whole gradient's memory is free from there, and clipping sums the
// shards' squares over the ranks (zero.all_reduce). Stage 3 shards the
// parameters themselves (zero_gathers.hpp): autodiff's gradient of each
// gathered parameter is already the rank's averaged shard, which the
// update reads as stage 2's. The ops: host/ops/host_run.cpp.
#pragma once

#include "lowering/model_graph.hpp"
#include "model/model_spec.hpp"

namespace tandem::host::lowering {

// ZeRO's stage and ranks are the model's (ModelGraph::zero, from build_forward).
Result<void> append_optimizer(ModelGraph& model, const model::TrainSpec& train);

}  // namespace tandem::host::lowering
