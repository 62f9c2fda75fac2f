// The communicators of a training run's ranks: one over every rank (to
// agree on stopping, skipping and checkpoints, and the one exchange of data,
// tensor or pipeline parallelism alone) and, with several kinds, one per
// tensor-parallel group, one across the groups for the ranks that hold the
// same slices, one per pipeline for its stages. A run of one process has none, and answers as one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "device/device.hpp"
#include "exec/executor.hpp"
#include "plugin/registry.hpp"
#include "program/program.hpp"
#include "train/distributed.hpp"
#include "train/run_checkpoints.hpp"

namespace tandem::host::train {

class RunRanks {
 public:
  // Joins the run's communicators, in the same order on every rank.
  // Through the comm plugin `options` choose (GradientCommunicator::create).
  static Result<RunRanks> connect(const PluginRegistry& registry, const DeviceHandle& device,
                                  const program::ProcessGroup& group, const program::ParallelLayout& layout,
                                  const CommOptions& options);

  bool alone() const noexcept { return all_ == nullptr; }
  // Not alone: every rank, the tensor-parallel group, the data-parallel peers.
  GradientCommunicator& all() const { return *all_; }
  GradientCommunicator& tensor() const { return tensor_ ? *tensor_ : *all_; }
  GradientCommunicator& data() const { return data_ ? *data_ : *all_; }
  // Pipeline parallelism: the ranks that differ only in their stage; nullptr without it.
  GradientCommunicator* pipeline() const {
    return pipeline_ ? pipeline_.get() : stages_are_all_ ? all_.get() : nullptr;
  }
  // The maximum of `value` over every rank (alone: `value`).
  Result<int32_t> max(int32_t value) const { return alone() ? value : all_->max(value); }
  // The collectives the executor's comm.* and zero.* nodes run through.
  void give_to(exec::ExecutorOptions& options, const program::Program& program) const;
  RunCheckpoints::Ranks for_checkpoints() const;

 private:
  Result<void> join_stages(const PluginRegistry& registry, const DeviceHandle& device,
                           const program::ProcessGroup& group, const program::ParallelLayout& layout,
                           const CommOptions& options);

  std::unique_ptr<GradientCommunicator> all_, tensor_, data_, pipeline_;
  bool stages_are_all_ = false;  // every rank is one stage: the pipeline's communicator is all_
};

}  // namespace tandem::host::train
