// What a placed training graph will cost before anything is allocated:
// memory per device (the executor's own planner, with the layouts and
// kernel workspaces the executor would choose) and step time (measured op
// costs per device and copy costs between devices, cost_model.hpp).
//
// The step time adds compute and transfers between devices as if nothing
// overlapped: an upper bound when copies run beside compute. A streamed
// value's copies overlap its device's compute (exec/streamed_state.hpp):
// only the part of them longer than that compute counts. Forward and backward count
// once per micro-batch, the optimizer once per step.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "exec/pipeline_schedule.hpp"
#include "exec/planner.hpp"
#include "graph/graph.hpp"
#include "place/cost_model.hpp"
#include "place/placement.hpp"

namespace tandem::host::place {

struct DeviceEstimate {
  std::string device;
  exec::MemoryEstimate memory;
  double compute_us = 0;                   // per optimizer step
  double forward_us = 0, backward_us = 0;  // of it, every micro-batch's forward and backward
  uint64_t streamed_bytes = 0;             // per optimizer step, both ways (exec/stream_plan.hpp)
  double stream_us = 0;                    // their copies' time per step (with a cost model)
  // Streamed copies run beside compute on a copy stream: only what is
  // longer than the compute lengthens the step.
  double stream_exposed_us() const { return stream_us > compute_us ? stream_us - compute_us : 0; }
  uint64_t budget = 0;  // 0: none
  // A pipelined step (EstimateInputs::pipelined): this device's stage
  // (-1: none, it only updates) and the micro-batches it holds at once,
  // each with its own activations, inputs and workspace (in `memory`).
  int stage = -1;
  size_t in_flight = 1;
  uint64_t per_micro_batch = 0;  // those bytes of one micro-batch in flight
  uint64_t over() const { return budget > 0 && memory.total > budget ? memory.total - budget : 0; }
};

struct PlanEstimate {
  std::vector<DeviceEstimate> devices;  // the placement's order, the default device first
  double transfer_us = 0;               // per optimizer step
  size_t copies = 0;                    // copy nodes (each runs once per micro-batch or step)
  uint64_t copy_bytes = 0;
  bool timed = false;  // step times measured (a cost model was given)
  // A pipelined step (EstimateInputs::pipelined): its stages (devices with
  // forward or backward nodes), their segments with their measured costs
  // per micro-batch, and the order the executor would run them in
  // (interleaved where every device holds several chunks of the model).
  size_t stages = 0;
  exec::PipelineShape shape;
  exec::PipelineOrder order;
  double step_us() const;
  // The pipelined step simulated on those costs (exec::simulate): forward
  // and backward, then every device's optimizer phase and the copies, and the share of
  // device time idle (step_us() and no idle share when the order cannot
  // finish: the micro-batches then run one after another). Stages of unequal times idle more than the bubble
  // of equal ones, (S - 1) / (M + S - 1); interleaved ones less.
  struct Pipelined {
    double step_us = 0;
    double idle = 0;
  };
  Pipelined pipelined() const;
  // The step as it will run: pipelined over several stages, else step_us().
  double step_us_as_run() const { return stages > 1 ? pipelined().step_us : step_us(); }
  uint64_t over() const;  // bytes over budget, all devices together
  const DeviceEstimate* find(const std::string& device) const;
};

// Kernel workspaces by device and op (kernel_prepare allocates nothing, but
// is not free: each op is prepared once per device and layout).
class WorkspaceCache {
 public:
  Result<size_t> workspace(const DeviceHandle& device, const exec::OpSpec& spec);

 private:
  std::map<std::string, size_t> bytes_;
};

// The executor's memory plan of `graph` on `device` (exec::Executor::create
// makes the same one): `keep` are values the host reads after a run,
// `staged` inputs get a second buffer (the next batch is copied into it
// while a step runs), `stream` values are streamed through the device
// (their names absent from `graph` are skipped), ZeRO's nodes exchange
// with `zero_world` ranks.
Result<exec::Plan> plan_memory(const DeviceHandle& device, const Graph& graph,
                               const std::set<std::string>& keep, const std::set<std::string>& staged,
                               WorkspaceCache& workspaces, const std::set<std::string>& stream = {},
                               size_t stream_depth = 1, int zero_world = 1);

struct EstimateInputs {
  std::map<std::string, const DeviceHandle*> devices;  // every device of the placement, by id
  std::string default_device;                          // the device of an unplaced graph
  std::map<std::string, uint64_t> budgets;             // by device id
  std::set<std::string> keep;                          // values the host reads (loss, logits)
  std::set<std::string> staged;                        // inputs prefetched into a second buffer
  uint32_t micro_batches = 1;
  std::set<std::string> streamed;  // values streamed through the device (exec/stream_plan.hpp)
  size_t stream_depth = 1;
  int zero_world = 1;  // ZeRO's ranks: the padding buffers of its nodes
  // The micro-batches run as a pipeline over the placement's devices
  // (exec/pipeline_schedule.hpp): each device holds as many at once as
  // one-forward-one-backward has in flight on its stage.
  bool pipelined = false;
  CostModel* costs = nullptr;  // null: memory only
  WorkspaceCache* workspaces = nullptr;
};

// `placement` null: the whole graph on `default_device`.
Result<PlanEstimate> estimate_plan(const Graph& graph, const Placement* placement, const EstimateInputs& in);

}  // namespace tandem::host::place
