// The scalars of a running step as feature hooks see them
// (tdm_host_api.run_scalar_get/set): any one-element value of the training
// graph, by name ("loss", "optim.lr", a loss scale a pass added), read from
// and written to the device through the executor.
#pragma once

#include "exec/executor.hpp"
#include "graph/graph.hpp"
#include "plugin/run_scalars.hpp"

namespace tandem::host::program {

class ExecutorScalars final : public RunScalars {
 public:
  ExecutorScalars(const Graph& graph, exec::Executor& executor) : graph_(graph), executor_(executor) {}
  Result<double> get(const std::string& name) override;
  Result<void> set(const std::string& name, double value) override;

 private:
  Result<const Value*> scalar(const std::string& name) const;

  const Graph& graph_;
  exec::Executor& executor_;
};

}  // namespace tandem::host::program
