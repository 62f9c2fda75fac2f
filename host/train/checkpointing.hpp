// Moving a model's persistent tensors (parameters and state: optimizer
// moments, running statistics, lr/step scalars) between an executor and a
// safetensors checkpoint, and managing the checkpoints of a run directory:
//   <run-dir>/checkpoints/step-<step, 9 digits>.safetensors, the last N kept
// (or step-….sharded directories of a ZeRO run: sharded_checkpoint.hpp).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "checkpoint/safetensors.hpp"
#include "exec/executor.hpp"
#include "graph/graph.hpp"

namespace tandem::host::train {

// Every PARAMETER and STATE value of `graph`, read from `executor`.
Result<checkpoint::Checkpoint> collect_tensors(const Graph& graph, exec::Executor& executor,
                                               std::map<std::string, std::string> metadata);
// Those of them `read` reads: it returns false for a value it leaves out
// (one another pipeline stage holds).
using TensorReader = std::function<Result<bool>(ValueId value, void* host, size_t bytes)>;
Result<checkpoint::Checkpoint> collect_tensors(const Graph& graph, const TensorReader& read,
                                               std::map<std::string, std::string> metadata);

// Writes the checkpoint's tensors into the executor. `weights_only` restores
// parameters (and running statistics) but not optimizer state. A tensor the
// graph needs but the file lacks, or one whose shape differs, is an error
// naming it and the file; nothing is written to the device before all checks
// pass. A state that starts as a copy of another value (Value::copy_of) is
// copied from it after the load when `weights_only` or the file lacks it.
// `new_parameters` (LoRA's adapters) may be absent from weights loaded with
// `weights_only`: they keep their initial values.
Result<void> restore_tensors(const Graph& graph, exec::Executor& executor, const checkpoint::Checkpoint& cp,
                             bool weights_only, const std::string& source,
                             const std::set<ValueId>& new_parameters = {});

// Where a checkpoint left its run: the metadata a resume continues from.
struct RunPosition {
  int64_t step = 0;         // optimizer steps done
  int64_t epoch = 0;        // epochs done
  int64_t next_batch = 0;   // the next batch of the current epoch
  int64_t world_size = 1;   // ranks that split the data
  int64_t total_steps = 0;  // the optimizer steps the run was planned for (0: not recorded)
};
// Read from `cp`'s metadata (absent keys: a run's start); a value that is
// not a non-negative integer (world_size: positive) is an error naming the
// key and `source`.
Result<RunPosition> checkpoint_position(const checkpoint::Checkpoint& cp, const std::string& source);

std::string checkpoint_dir(const std::string& run_dir);
// The file of step `step`'s checkpoint in a run directory (one file, not
// ZeRO's sharded directory).
std::string checkpoint_file(const std::string& run_dir, int64_t step);
// Saves atomically, then deletes the oldest beyond `keep`.
Result<std::string> save_checkpoint(const std::string& run_dir, int64_t step,
                                    const checkpoint::Checkpoint& cp, int64_t keep);
// Deletes the oldest checkpoints of a run directory beyond `keep` (0: none).
void remove_old_checkpoints(const std::string& run_dir, int64_t keep);
// The newest checkpoint of a run directory (a file or a sharded
// checkpoint's directory), if any.
std::optional<std::string> latest_checkpoint(const std::string& run_dir);
// A checkpoint file, or a sharded checkpoint's directory assembled whole.
Result<checkpoint::Checkpoint> read_checkpoint(const std::string& path);

}  // namespace tandem::host::train
