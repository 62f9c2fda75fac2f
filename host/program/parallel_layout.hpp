// How the processes of a launched run share the work. Groups of `tensor`
// consecutive ranks each hold one model, the layers marked `parallel` split
// among the group's ranks (tensor parallelism); the `data` groups each
// train on their own share of every batch (data parallelism).
#pragma once

#include "lowering/model_graph.hpp"
#include "model/model_spec.hpp"
#include "program/process_group.hpp"
#include "util/result.hpp"

namespace tandem::host::program {

struct ParallelLayout {
  int tensor = 1;  // ranks per group that split the parallel layers (1: none)
  int data = 1;    // groups that split the batches
  int tensor_rank = 0, data_rank = 0;

  lowering::TensorParallel tensor_parallel() const { return {tensor_rank, tensor}; }
  // This rank's group of tensor parallelism: the ranks that hold one model.
  ProcessGroup tensor_group(const ProcessGroup& run) const;
  // The ranks that hold the same slices, one in each group: they average
  // their gradients.
  ProcessGroup data_group(const ProcessGroup& run) const;
};

// `spec`'s [train] tensor_parallel (0: every rank) when some layer is marked
// `parallel` and the run has several ranks, else data parallelism alone (or
// one process with the whole model); an error names the key when it does
// not divide the run's ranks.
Result<ParallelLayout> parallel_layout(const model::ModelSpec& spec, const ProcessGroup& run);

}  // namespace tandem::host::program
