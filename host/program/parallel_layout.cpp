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

Result<ParallelLayout> parallel_layout(const model::ModelSpec& spec, const ProcessGroup& run) {
  ParallelLayout layout;
  const int64_t asked = spec.train.tensor_parallel;
  // One process (eval, a resumed run) holds the whole model whatever the key says.
  const int tensor =
      lowering::uses_tensor_parallelism(spec) && run.world > 1 ? (asked > 0 ? int(asked) : run.world) : 1;
  if (tensor > run.world || run.world % tensor != 0)
    return make_error(
        spec.path + ": [train] tensor_parallel = " + std::to_string(asked) + " does not divide the " +
            std::to_string(run.world) + " ranks of this run: launch a multiple of " + std::to_string(asked) +
            " processes (each group of " + std::to_string(asked) +
            " holds one model), or set tensor_parallel to a divisor of " + std::to_string(run.world),
        TDM_INVALID_ARGUMENT);
  layout.tensor = tensor;
  layout.data = run.world / tensor;
  layout.tensor_rank = run.rank % tensor;
  layout.data_rank = run.rank / tensor;
  return layout;
}

}  // namespace tandem::host::program
