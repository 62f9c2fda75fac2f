// The executor factories, and the answers of an executor that has no
// copies between devices (one device: see executor.hpp).
#include "exec/executor.hpp"

#include <algorithm>
#include <utility>

#include "exec/composed_executor.hpp"
#include "exec/device_executor.hpp"

namespace tandem::host::exec {

Result<std::unique_ptr<Executor>> Executor::create(const DeviceHandle& device, const Graph& graph,
                                                   ExecutorOptions options) {
  auto executor = DeviceExecutor::create(device, graph, std::move(options));
  if (!executor) return executor.error();
  return std::unique_ptr<Executor>(std::move(*executor));
}

std::unique_ptr<ComposedExecutor> Executor::compose(std::vector<ExecutorPart> parts,
                                                    std::vector<ExecutorTransfer> transfers,
                                                    size_t global_nodes,
                                                    std::map<ValueId, std::pair<size_t, ValueId>> owner) {
  return std::make_unique<ComposedExecutor>(std::move(parts), std::move(transfers), global_nodes,
                                            std::move(owner));
}

const std::vector<ExecutorPart>& Executor::parts() const noexcept {
  static const std::vector<ExecutorPart> none;
  return none;
}

const std::vector<ExecutorTransfer>& Executor::transfers() const noexcept {
  static const std::vector<ExecutorTransfer> none;
  return none;
}

double Executor::hidden_transfer_fraction() const noexcept {
  const double busy = transfer_busy_us();
  if (busy <= 0) return 0.0;
  return std::clamp(1.0 - transfer_wait_us() / busy, 0.0, 1.0);
}

}  // namespace tandem::host::exec
