// The executor of a graph placed on several devices: one executor per
// device over its part (split.hpp), composed into one that runs the global
// schedule with the copies between devices (exec/composed_executor.hpp).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "device/device.hpp"
#include "exec/composed_executor.hpp"
#include "exec/pipeline_layout.hpp"
#include "place/placement.hpp"
#include "place/split.hpp"

namespace tandem::host::place {

// A part's options: what of `options` concerns the graph of device `d`
// (its outputs, its external values), the values other devices read kept
// as outputs; profiling and numerics checks as asked.
exec::ExecutorOptions part_options(const DeviceGraph& d, const exec::ExecutorOptions& options);

// `devices`: every device of the placement, by id. `options` apply to every
// part (outputs and external values go to the part that holds them);
// `budgets` are bytes per device id (absent: no limit). The composed type,
// so whoever placed the graph can still set how its copies run.
Result<std::unique_ptr<exec::ComposedExecutor>> make_placed_executor(
    const std::map<std::string, const DeviceHandle*>& devices, const Graph& placed,
    const Placement& placement, const exec::ExecutorOptions& options,
    const std::map<std::string, uint64_t>& budgets);

// The same graph with its forward and backward pipelined over `request`'s
// micro-batches (exec/pipelined_executor.hpp): a PipelinedExecutor; or,
// where the graph cannot be pipelined (exec/pipeline_layout.hpp), the
// composed executor, and `why_not` says why.
Result<std::unique_ptr<exec::Executor>> make_pipelined_executor(
    const std::map<std::string, const DeviceHandle*>& devices, const Graph& placed,
    const Placement& placement, const exec::ExecutorOptions& options,
    const std::map<std::string, uint64_t>& budgets, const exec::PipelineRequest& request,
    std::string& why_not);

}  // namespace tandem::host::place
