// A training run's memory as it reports it: what each device's plan
// promised and what its allocations and allocator held (--memory-report,
// metrics.jsonl's memory records), and where a run of several devices put
// its layers and copies (its placement record).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "device/device.hpp"
#include "model/model_spec.hpp"
#include "program/program.hpp"
#include "train/progress.hpp"

namespace tandem::host::train {

class RunMemory {
 public:
  // `budgets`: --memory-budget by device id.
  RunMemory(const model::ModelSpec& spec, const DeviceHandle& device, const program::Program& program,
            std::map<std::string, uint64_t> budgets)
      : spec_(&spec), device_(&device), program_(&program), budgets_(std::move(budgets)) {}

  // What each device's allocator held at most so far: called once the
  // training steps end, before an evaluation's executors exist.
  void note_training_peaks();
  // By device id; empty before note_training_peaks.
  const std::map<std::string, uint64_t>& training_peaks() const { return training_peaks_; }
  // Planned, training and overall peaks per device, into metrics.jsonl.
  void record(Progress& progress) const;
  // A run of several devices: each layer's device and the copies per step.
  void record_placement(Progress& progress) const;
  // --memory-report: each device's plan beside what it held; `steps` trained.
  void report(int64_t steps) const;
  // Pipeline parallelism: each stage's (rank's) busy and idle time per step
  // (RankPipelineExecutor::stage_times, which every rank takes part in).
  void report_stages(const std::vector<exec::RankPipelineExecutor::StageTime>& stages,
                     size_t micro_batches) const;

 private:
  uint64_t budget(const std::string& device) const;
  uint64_t training_peak(const std::string& device) const;
  void report_pipeline(const exec::PipelinedExecutor& pipeline) const;

  const model::ModelSpec* spec_;
  const DeviceHandle* device_;
  const program::Program* program_;
  std::map<std::string, uint64_t> budgets_;
  std::map<std::string, uint64_t> training_peaks_;
};

}  // namespace tandem::host::train
