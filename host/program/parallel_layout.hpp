// How the processes of a launched run share the work, on a grid of
// data x tensor x pipeline ranks. Groups of `tensor` consecutive ranks each
// hold the same layers, those marked `parallel` split among the group's
// ranks (tensor parallelism); the `pipeline` stages each hold a run of
// consecutive layers (pipeline parallelism: rank r is in stage
// r / (tensor * data)); within a stage, the `data` groups each train on
// their own share of every batch (data parallelism):
//   rank = (pipeline_rank * data + data_rank) * tensor + tensor_rank.
#pragma once

#include "lowering/model_graph.hpp"
#include "model/model_spec.hpp"
#include "program/process_group.hpp"
#include "util/result.hpp"

namespace tandem::host::program {

struct ParallelLayout {
  int tensor = 1;    // ranks per group that split the parallel layers (1: none)
  int data = 1;      // groups that split the batches
  int pipeline = 1;  // stages that split the layers
  int tensor_rank = 0, data_rank = 0, pipeline_rank = 0;

  lowering::TensorParallel tensor_parallel() const { return {tensor_rank, tensor}; }
  // This rank's group of tensor parallelism: the ranks that hold one model.
  ProcessGroup tensor_group(const ProcessGroup& run) const;
  // The ranks that hold the same slices, one in each group: they average
  // their gradients.
  ProcessGroup data_group(const ProcessGroup& run) const;
  // The ranks that differ only in their stage: they pass activations and
  // gradients along the pipeline.
  ProcessGroup pipeline_group(const ProcessGroup& run) const;
  // Each group's number, unique among the groups of its kind (the comm
  // plugin's tdm_comm_init_info.group).
  int tensor_group_index() const { return pipeline_rank * data + data_rank; }
  int data_group_index() const { return pipeline_rank * tensor + tensor_rank; }
  int pipeline_group_index() const { return data_rank * tensor + tensor_rank; }
};

// `spec`'s [train] pipeline_parallel (stages), then its tensor_parallel (0:
// every rank of a stage) when some layer is marked `parallel`, the rest data
// parallelism (or one process with the whole model); an error names the key
// when it does not divide the run's ranks.
Result<ParallelLayout> parallel_layout(const model::ModelSpec& spec, const ProcessGroup& run);

}  // namespace tandem::host::program
