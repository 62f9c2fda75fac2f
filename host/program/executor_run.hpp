// A running training step as feature hooks see it (tdm_run*): any
// one-element value of the training graph by name ("loss", "optim.lr", a
// loss scale a pass added), read from and written to the device through the
// executor (run_scalar_get/set); across the ranks of a parallel run, their
// maximum (run_ranks_max) through the run's communicator; and at step
// boundaries whole parameters and states, and files of them written into
// the run directory (ABI 1.12).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "exec/executor.hpp"
#include "lowering/model_graph.hpp"
#include "plugin/run_access.hpp"

namespace tandem::host::program {

class ExecutorRun final : public RunAccess {
 public:
  ExecutorRun(const lowering::ModelGraph& model, exec::Executor& executor)
      : model_(model), executor_(executor) {}
  Result<double> get(const std::string& name) override;
  Result<void> set(const std::string& name, double value) override;
  Result<int32_t> max_over_ranks(int32_t value) override {
    return max_over_ranks_ ? max_over_ranks_(value) : value;
  }
  void set_ranks(std::function<Result<int32_t>(int32_t)> max_over_ranks) {
    max_over_ranks_ = std::move(max_over_ranks);
  }

  Result<TensorType> tensor_type(const std::string& name) override;
  Result<void> read_tensor(const std::string& name, void* out, size_t bytes) override;
  Result<void> write_tensor(const std::string& name, const void* in, size_t bytes) override;
  Result<std::string> save_tensors(const std::string& file_name, const std::vector<SavedTensor>& tensors,
                                   const std::string& plugin) override;
  // Where save_tensors writes, and whether this rank writes (the first rank
  // of a run does). Without a directory (bench, plan) save_tensors is
  // refused.
  void set_run_directory(std::string directory, bool writes) {
    run_dir_ = std::move(directory);
    writes_ = writes;
  }
  // How a run of several ranks makes this rank's tensors whole before the
  // first rank writes them (tensor-parallel slices, ZeRO shards gathered:
  // RunCheckpoints::make_whole), a collective every rank calls; `takes_part`:
  // whether this rank's tensors go into it (else it need not read them).
  using MakeWhole = std::function<Result<void>(checkpoint::Checkpoint&)>;
  void set_make_whole(MakeWhole make_whole, bool takes_part) {
    make_whole_ = std::move(make_whole);
    takes_part_ = takes_part;
  }
  // The optimizer steps taken, recorded in the files save_tensors writes.
  void set_step(int64_t step) { step_ = step; }

 private:
  Result<const Value*> scalar(const std::string& name) const;
  // A parameter or state value, and (the second) one of exactly `bytes`.
  Result<const Value*> persistent(const std::string& name) const;
  Result<const Value*> persistent(const std::string& name, size_t bytes) const;

  const lowering::ModelGraph& model_;
  exec::Executor& executor_;
  std::function<Result<int32_t>(int32_t)> max_over_ranks_;
  std::string run_dir_;
  bool writes_ = false;
  MakeWhole make_whole_;
  bool takes_part_ = false;
  int64_t step_ = 0;
};

}  // namespace tandem::host::program
