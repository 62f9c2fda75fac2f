// An executor that runs the forward and backward of a step's micro-batches
// itself, as a pipeline: over the devices of one process
// (pipelined_executor.hpp) or over the ranks of a run's pipeline stages
// (rank_pipeline.hpp). The trainer hands it every micro-batch of a step at
// once, then runs the optimizer phase through the Executor interface.
#pragma once

#include <cstddef>
#include <vector>

#include "graph/graph.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {

// Bytes of one value the host writes (ConstBytes) or reads (MutableBytes).
struct ConstBytes {
  const void* data = nullptr;
  size_t bytes = 0;
};
struct MutableBytes {
  void* data = nullptr;
  size_t bytes = 0;
};

// One segment as it ran, for the trace.
struct PipelineSpan {
  size_t stage = 0, micro = 0;
  bool backward = false;
  double start_us = 0, dur_us = 0;  // since the executor's profile epoch
};

class MicroBatchPipeline {
 public:
  virtual ~MicroBatchPipeline() = default;
  // Forward and backward of every micro-batch of a step: `inputs[m][k]`
  // are micro-batch m's bytes of the pipeline's per-micro-batch value k (the
  // batch, its labels, dropout's seed offset: Program::micro_batch_inputs);
  // `outputs` (global values, e.g. the loss) are read after each
  // micro-batch into `results[m][k]`. Returns when every micro-batch is
  // done, or with the first failure.
  virtual Result<void> run_micro_batches(const std::vector<std::vector<ConstBytes>>& inputs,
                                         const std::vector<ValueId>& outputs,
                                         const std::vector<std::vector<MutableBytes>>& results) = 0;
  // Micro-batches per step.
  virtual size_t micro_batch_count() const noexcept = 0;
};

}  // namespace tandem::host::exec
