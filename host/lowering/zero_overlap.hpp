// ZeRO's exchanges overlapped with compute, as DeepSpeed's overlap_comm and
// FSDP's prefetch do. Without this pass every zero.reduce_scatter and
// zero.all_gather of a training graph holds the schedule up until the ranks
// have exchanged; with it each is followed by a zero.wait, placed as late as
// the memory allows, and the executor runs the exchange meanwhile (on a
// communication thread, or a stream that waits on an event of the compute
// stream: exec/device_executor_zero.cpp).
//
// - A gradient's reduce-scatter (stages 2 and 3) starts where it stood,
//   right after backward's last reader of the whole gradient, and is waited
//   for before the second one after it starts, before the first reader of
//   its shard, and before the optimizer phase: two whole gradients (a
//   layer's weight and bias, finished by one node) beyond the plan without
//   overlap stay live while backward goes on, as DeepSpeed's two reduce
//   buckets do.
// - A layer's gathers of its parameters (stage 3, forward and backward)
//   start right after the waits of the layer gathered before it, so they run
//   while that layer computes, and each is waited for before its first
//   reader: two layers' whole parameters at a time instead of one (the
//   gather window).
// The exchanges keep their order, which is the same on every rank; each
// wait reads the exchange's input, so the memory plan keeps it until the
// exchange is over. The shard a reduce-scatter makes goes through a value of
// its own into the gradient the optimizer reads (the wait's output), so a
// pass after this one (grad_accum, loss scaling) reads the finished shard.
#pragma once

#include "lowering/model_graph.hpp"

namespace tandem::host::lowering {

// After append_optimizer; a training graph without ZeRO's exchanges is
// left as it is.
Result<void> overlap_zero_exchanges(ModelGraph& model);

// The value that carries an exchange's result to its readers: the output of
// the zero.wait that reads `exchanged`, or `exchanged` itself.
ValueId zero_exchange_result(const Graph& graph, ValueId exchanged);

}  // namespace tandem::host::lowering
