// The scalars of a running step as feature hooks see them
// (tdm_host_api.run_scalar_get/set): any one-element value of the training
// graph, by name ("loss", "optim.lr", a loss scale a pass added), read from
// and written to the device through the executor; and, across the ranks of
// a parallel run, their maximum (run_ranks_max) through the run's
// communicator.
#pragma once

#include <functional>

#include "exec/executor.hpp"
#include "graph/graph.hpp"
#include "plugin/run_scalars.hpp"

namespace tandem::host::program {

class ExecutorScalars final : public RunScalars {
 public:
  ExecutorScalars(const Graph& graph, exec::Executor& executor) : graph_(graph), executor_(executor) {}
  Result<double> get(const std::string& name) override;
  Result<void> set(const std::string& name, double value) override;
  Result<int32_t> max_over_ranks(int32_t value) override {
    return max_over_ranks_ ? max_over_ranks_(value) : value;
  }
  void set_ranks(std::function<Result<int32_t>(int32_t)> max_over_ranks) {
    max_over_ranks_ = std::move(max_over_ranks);
  }

 private:
  Result<const Value*> scalar(const std::string& name) const;

  const Graph& graph_;
  exec::Executor& executor_;
  std::function<Result<int32_t>(int32_t)> max_over_ranks_;
};

}  // namespace tandem::host::program
