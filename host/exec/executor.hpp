// The executor interface: what the trainer, the evaluator and the reports
// ask of a planned graph that runs — copy values in and out, run ranges of
// the schedule, stage the next batch, read memory and profile figures.
//
// Two kinds implement it:
//   DeviceExecutor   (device_executor.hpp) one device: prepared kernels, the
//                    memory plan and its buffers, one stream.
//   ComposedExecutor (composed_executor.hpp) a graph placed on several
//                    devices: one DeviceExecutor per device ("parts") and the
//                    copies between them, overlapped with compute.
// Callers hold an Executor and do not need to know which one they have:
// create() makes the first, compose() the second.
//
// Questions that only a composed executor has a real answer to (its parts,
// its copies and their timing) are on the interface anyway, with the true
// answer for one device — no parts, no copies, zero time — so reports can
// print whichever kind a run made without casting. What only configures a
// composed executor (ComposedExecutor::set_transfer_options) is on it alone:
// those who compose hold that type, and one device has nothing to configure.
//
// Lifetimes: the DeviceHandles must outlive the executor; the graph is read
// only during create (the executor keeps what it needs), so later changes to
// the graph are not seen. External buffers (ExecutorOptions::external) are
// owned by someone else (usually the train executor whose parameters an eval
// executor shares) and must outlive this executor.
//
// Thread use: one thread at a time (a stream is used by one thread); the
// copy engine's threads are internal.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "device/device.hpp"
#include "exec/collectives.hpp"
#include "exec/copy_engine.hpp"
#include "exec/node_profile.hpp"
#include "exec/numerics_guard.hpp"
#include "exec/planner.hpp"
#include "exec/stage_link.hpp"
#include "exec/streamed_state.hpp"
#include "exec/transfer_schedule.hpp"
#include "graph/graph.hpp"
#include "util/result.hpp"

namespace tandem::host::exec {

struct ExecutorOptions {
  // Persistent values bound by name to device buffers of the same device
  // that another owner allocated (no allocation here, never freed here).
  std::map<std::string, void*> external;
  // Synchronise after every node and record its wall time.
  bool profile = false;
  // Activations the host reads after a run (loss, logits): kept live to the
  // end of the schedule instead of being reused once their last reader ran.
  std::vector<std::string> outputs;
  // Runs the graph's "comm.*" nodes (tensor parallelism); must outlive the
  // executor. A graph with such nodes and no collectives is refused.
  Collectives* collectives = nullptr;
  // Runs the graph's "zero.*" nodes (ZeRO: the data-parallel peers that
  // share the optimizer's state); must outlive the executor.
  Collectives* data_collectives = nullptr;
  // ZeRO's overlapped exchanges (lowering/zero_overlap.hpp) go on a
  // communication stream ordered by events where the backend gives the comm
  // plugin a native stream, else on a host thread. Tests set this to take
  // the stream route on a CPU backend, whose streams run synchronously.
  bool exchanges_on_streams = false;
  // Bytes this executor may allocate on its device (0: no limit). A plan
  // over it is refused before anything is allocated, with the breakdown.
  uint64_t memory_budget = 0;
  // Debug checks around every node (exec/numerics_guard.hpp).
  NumericsOptions numerics;
  // Pipeline parallelism across ranks: the other stages
  // (rank_pipeline.hpp); must outlive the executor.
  StageLink* stage_link = nullptr;
  // Persistent values (parameters, gradients, optimizer state) whose home
  // is host memory: each is on the device only around the nodes that touch
  // it, in the arena, fetched `stream_depth` units ahead (stream_plan.hpp).
  // One also bound in `external` has its home there: host memory another
  // executor owns (an evaluation sharing a streamed run's parameters).
  std::set<std::string> streamed;
  size_t stream_depth = 1;
};

class DeviceExecutor;
class ComposedExecutor;

// One device's share of a composed executor. Whoever destroys or
// moves these needs device_executor.hpp (the executor's complete type).
struct ExecutorPart {
  std::unique_ptr<DeviceExecutor> executor;
  std::string device;
  std::vector<size_t> positions;        // the global schedule position of each local node
  std::map<ValueId, ValueId> local_of;  // global value -> the part's value
};
struct ExecutorTransfer {
  size_t position = 0;  // in the global schedule
  size_t from_part = 0, to_part = 0;
  ValueId from = kNoValue, to = kNoValue;  // the parts' values
  size_t bytes = 0;
  // Set by compose: where it is issued and waited for (transfer_schedule.hpp)
  // and how its bytes travel (copy_engine.hpp).
  TransferPoints points;
  CopyRoute route = CopyRoute::HostMemcpy;
};

class Executor {
 public:
  // A DeviceExecutor (DeviceExecutor::create, for callers that need that type).
  static Result<std::unique_ptr<Executor>> create(const DeviceHandle& device, const Graph& graph,
                                                  ExecutorOptions options = {});
  // Several parts run as one: `global_nodes` schedule positions, each a node
  // of one part or a transfer; `owner` maps every global value the host may
  // address to the part that holds it (its home) and the part's value.
  static std::unique_ptr<ComposedExecutor> compose(std::vector<ExecutorPart> parts,
                                                   std::vector<ExecutorTransfer> transfers,
                                                   size_t global_nodes,
                                                   std::map<ValueId, std::pair<size_t, ValueId>> owner);
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  // Nothing may still run when an executor is gone: each kind waits first.
  virtual ~Executor() = default;

  // Host <-> device copies of a whole value (`bytes` must be its size).
  // Both are ordered after every node already launched and synchronise, so
  // the host buffer may be reused (write) or read (read) as soon as they
  // return. Composed: each goes to the part that holds the value.
  virtual Result<void> write(ValueId value, const void* host, size_t bytes) = 0;
  virtual Result<void> read(ValueId value, void* host, size_t bytes) = 0;
  // Every element of `value` set to `number` with the backend's "fill" op
  // (any dtype), or by copies from host memory when the backend has none;
  // then synchronised.
  virtual Result<void> fill(ValueId value, double number) = 0;
  // Device address of a value (arena values are only meaningful while live
  // within a run); nullptr for an unknown id or a streamed value.
  virtual void* device_pointer(ValueId value) const = 0;
  // A streamed value's home in host memory (ExecutorOptions::streamed);
  // nullptr for any other.
  virtual void* stream_home(ValueId /*value*/) const { return nullptr; }
  // The streamed values' copies since creation (none: zeros).
  virtual StreamStats stream_stats() const { return {}; }

  // Launches nodes [first, end) of the schedule in order, then synchronises.
  // A failed launch names the node, its layer and the plugin's message; an
  // error raised asynchronously is reported at the synchronisation (with
  // profile on, every node is synchronised, so it names the node).
  // Composed: the copies of the range overlap compute; when run returns,
  // they are finished too, and a failed copy is reported here, naming the
  // value and its two devices.
  virtual Result<void> run(size_t first, size_t end) = 0;
  Result<void> run() { return run(0, node_count()); }
  virtual Result<void> synchronize() = 0;
  // The one stream every node runs on, for callers that order their own
  // device work after nodes with events (data-parallel all-reduce on a
  // communication stream); nullptr for an executor with several (composed).
  virtual tdm_stream* compute_stream() const noexcept { return nullptr; }
  // Nodes [first, end) launched without waiting for them: run() less its
  // final synchronisation, so an error raised asynchronously shows at the
  // next one. An executor with no compute_stream() cannot be ordered
  // against, so it runs them (synchronising).
  virtual Result<void> launch_range(size_t first, size_t end) { return run(first, end); }

  // Next-batch prefetch (staged_inputs.hpp). allow_staging gives an INPUT
  // value a second device buffer, accounted in plan().estimate.inputs and
  // checked against the memory budget (anything else is refused, named).
  // stage copies host bytes into a staging buffer (the host buffer may be
  // reused on return) and enqueues their copy into that second buffer on a
  // copy stream, overlapping whatever runs. use_staged, before the run that
  // reads them, swaps the two buffers of every value staged since the last
  // use and orders the compute stream after the copies (no host wait). A
  // write() of a staged value replaces its pending staged bytes.
  virtual Result<void> allow_staging(ValueId value) = 0;
  // A device buffer of `bytes` beside the graph's values, for the run's own
  // use (the data-parallel all-reduce packs gradient buckets into one):
  // counted in plan().estimate (buffers) and checked against the memory
  // budget as the plan was, refused naming `what` when it does not fit.
  // Freed with the executor.
  virtual Result<void*> reserve_buffer(size_t bytes, const std::string& what) = 0;
  virtual Result<void> stage(ValueId value, const void* host, size_t bytes) = 0;
  virtual Result<void> use_staged() = 0;

  // A composed executor: the first part's plan; parts() has them all.
  virtual const Plan& plan() const noexcept = 0;
  virtual size_t node_count() const noexcept = 0;
  // Bytes this executor allocated (arena, workspace, persistent values not
  // bound externally).
  virtual uint64_t allocated_bytes() const noexcept = 0;
  // What this executor's own allocations hold, by what they hold: its
  // persistent values' slots by category, its arena (activations),
  // workspaces, inputs' second buffers and the run's buffers; `total`: the
  // allocations as the device allocator rounds them. Values bound
  // externally or streamed are not its own. Composed: empty (see parts()).
  virtual MemoryEstimate held() const noexcept { return {}; }
  // The device's peak allocated bytes as the host's allocator of the device
  // counts them (every executor of the run on it; since the last reset_peak);
  // composed: the sum over its devices.
  virtual uint64_t measured_peak() const = 0;

  // Several devices (neutral answers for one: see the top of this file).
  // The per-device executors, and the copies between them in schedule order.
  virtual const std::vector<ExecutorPart>& parts() const noexcept;
  virtual const std::vector<ExecutorTransfer>& transfers() const noexcept;
  // Reads from device memory into the host (each one waits for the device),
  // and their bytes, since creation: what a training step costs the link.
  virtual uint64_t host_reads() const noexcept { return 0; }
  virtual uint64_t host_read_bytes() const noexcept { return 0; }
  // Cross-device copies run, and their bytes, since creation.
  virtual uint64_t transfers_run() const noexcept { return 0; }
  virtual uint64_t transferred_bytes() const noexcept { return 0; }
  // Time copies took since creation, and of it the time someone waited for
  // them (the host, or a device stream: an upper bound); the rest was hidden
  // behind compute. Microseconds.
  virtual double transfer_busy_us() const noexcept { return 0.0; }
  virtual double transfer_wait_us() const noexcept { return 0.0; }
  // 1 - wait/busy, in [0, 1]; 0 before any copy ran.
  double hidden_transfer_fraction() const noexcept;

  // Profiling (options.profile): per-node accumulated wall time in
  // microseconds (indexed by schedule position) and every execution.
  const std::vector<double>& node_time_us() const noexcept { return profile().time_us; }
  const std::vector<ProfileEvent>& profile_events() const noexcept { return profile().events; }
  // Streamed values' copies of the profiled runs (one device: its copy stream).
  const std::vector<CopyEvent>& profile_copies() const noexcept { return profile().copies; }
  virtual void clear_profile() = 0;
  // Where the node at a schedule position runs: its device ("onednn:0";
  // "a -> b" for a copy between devices) and its kernel's own description
  // (tdm_backend_api.kernel_describe, "" when the backend has none).
  struct NodeKernel {
    std::string device;
    std::string kernel;
  };
  virtual NodeKernel node_kernel(size_t position) const = 0;
  // The instant ProfileEvent times count from (lets callers align their own spans).
  std::chrono::steady_clock::time_point profile_epoch() const noexcept { return profile().epoch; }

 protected:
  Executor() = default;
  virtual const NodeProfile& profile() const noexcept = 0;
};

}  // namespace tandem::host::exec
