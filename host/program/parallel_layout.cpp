#include "program/parallel_layout.hpp"

#include <string>

namespace tandem::host::program {

namespace {

// A group of the run: no launcher of its own, and no node-local rank (the
// node's processes are the run's, not the group's).
ProcessGroup subgroup(const ProcessGroup& run, int rank, int world) {
  ProcessGroup g = run;
  g.rank = rank;
  g.world = world;
  g.local_rank = -1;
  g.local_world = 0;
  return g;
}

}  // namespace

ProcessGroup ParallelLayout::tensor_group(const ProcessGroup& run) const {
  return subgroup(run, tensor_rank, tensor);
}

ProcessGroup ParallelLayout::data_group(const ProcessGroup& run) const {
  return subgroup(run, data_rank, data);
}

ProcessGroup ParallelLayout::pipeline_group(const ProcessGroup& run) const {
  return subgroup(run, pipeline_rank, pipeline);
}

Result<ParallelLayout> parallel_layout(const model::ModelSpec& spec, const ProcessGroup& run) {
  ParallelLayout layout;
  // One process (eval, a resumed run) holds the whole model whatever the keys say.
  const int64_t stages = spec.train.pipeline_parallel;
  if (stages > 1 && run.world > 1 && run.world % stages != 0)
    return make_error(spec.path + ": [train] pipeline_parallel = " + std::to_string(stages) +
                          " does not divide the " + std::to_string(run.world) +
                          " ranks of this run: launch a multiple of " + std::to_string(stages) +
                          " processes (one per stage, times the data- and tensor-parallel ranks of each)",
                      TDM_INVALID_ARGUMENT);
  layout.pipeline = stages > 1 && run.world > 1 ? int(stages) : 1;
  const int per_stage = run.world / layout.pipeline;
  const int64_t asked = spec.train.tensor_parallel;
  const int tensor =
      lowering::uses_tensor_parallelism(spec) && per_stage > 1 ? (asked > 0 ? int(asked) : per_stage) : 1;
  if (tensor > per_stage || per_stage % tensor != 0)
    return make_error(spec.path + ": [train] tensor_parallel = " + std::to_string(asked) +
                          " does not divide the " + std::to_string(per_stage) + " ranks of " +
                          (layout.pipeline > 1 ? "each pipeline stage" : std::string("this run")) +
                          ": launch a multiple of " + std::to_string(asked * layout.pipeline) +
                          " processes (each group of " + std::to_string(asked) +
                          " holds the same layers), or set tensor_parallel to a divisor of " +
                          std::to_string(per_stage),
                      TDM_INVALID_ARGUMENT);
  layout.tensor = tensor;
  layout.data = per_stage / tensor;
  layout.tensor_rank = run.rank % tensor;
  layout.data_rank = (run.rank / tensor) % layout.data;
  layout.pipeline_rank = run.rank / per_stage;
  return layout;
}

}  // namespace tandem::host::program
