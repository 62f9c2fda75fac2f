// Runs a planned graph on one device: prepared kernels, one arena for the
// transient values, one workspace, one allocation per persistent value, and
// one stream on which nodes run in schedule order.
//
// Lifetimes: the DeviceHandle must outlive the executor; the graph is read
// only during create (the executor keeps what it needs), so later changes to
// the graph are not seen. External buffers (ExecutorOptions::external) are
// owned by someone else (usually the train executor whose parameters an eval
// executor shares) and must outlive this executor.
//
// Overlap (issue #5, point 5). A composed executor (several devices) issues
// each copy between its parts right after the node that produces the source
// and waits for it right before the first node that reads it, on copy
// streams with events, or on a copy thread between host-addressable devices
// (executor_parts.cpp, transfer_schedule.hpp, copy_engine.hpp); run() still
// returns with everything finished. An input may be staged: the next
// batch's copy into a second device buffer runs while the current step does
// (allow_staging/stage/use_staged, staged_inputs.hpp); the second buffer is
// part of the plan's estimate.
//
// Thread use: one thread at a time (the stream is used by one thread); the
// copy engine's threads are internal.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "device/device.hpp"
#include "exec/collectives.hpp"
#include "exec/copy_engine.hpp"
#include "exec/kernel_binding.hpp"
#include "exec/numerics_guard.hpp"
#include "exec/planner.hpp"
#include "exec/staged_inputs.hpp"
#include "exec/transfer_schedule.hpp"
#include "graph/graph.hpp"
#include "ops/op_table.hpp"
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
  // Bytes this executor may allocate on its device (0: no limit). A plan
  // over it is refused before anything is allocated, with the breakdown.
  uint64_t memory_budget = 0;
  // Debug checks around every node (exec/numerics_guard.hpp).
  NumericsOptions numerics;
};

class Executor;

// A graph placed on several devices (issue #5) runs as one executor made of
// one executor per device ("parts"), with the copies between them.
struct ExecutorPart {
  std::unique_ptr<Executor> executor;
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

// How a composed executor runs its copies.
struct TransferOptions {
  // Every copy at its own slot of the schedule, the host waiting for it and
  // every part synchronising its ranges: nothing overlaps (for debugging,
  // and as the reference the overlapped schedule must match bit for bit).
  // compose() sets it when the environment has TANDEM_SEQUENTIAL_COPIES=1.
  bool sequential = false;
  // Device ids whose parts are driven as if not host-addressable: copy
  // streams and events instead of memcpy. Lets a CPU backend run the code a
  // GPU runs (tests); slower, never needed otherwise.
  std::set<std::string> as_device;
};

// One node execution, for a Chrome trace ("X" events): microseconds since
// the executor was created.
struct ProfileEvent {
  size_t node = 0;  // schedule position
  double start_us = 0;
  double dur_us = 0;
};

class Executor {
 public:
  static Result<std::unique_ptr<Executor>> create(const DeviceHandle& device, const Graph& graph,
                                                  ExecutorOptions options = {});
  // Several parts run as one: `global_nodes` schedule positions, each a node
  // of one part or a transfer; `owner` maps every global value the host may
  // address to the part that holds it (its home) and the part's value.
  static std::unique_ptr<Executor> compose(std::vector<ExecutorPart> parts,
                                           std::vector<ExecutorTransfer> transfers, size_t global_nodes,
                                           std::map<ValueId, std::pair<size_t, ValueId>> owner);
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  // Waits for the stream, then releases kernels, frees buffers, destroys it.
  ~Executor();

  // Host <-> device copies of a whole value (`bytes` must be its size).
  // Both enqueue on the executor's stream and then synchronise it, so they
  // are ordered after every node already launched, and the host buffer may
  // be reused (write) or read (read) as soon as they return.
  Result<void> write(ValueId value, const void* host, size_t bytes);
  Result<void> read(ValueId value, void* host, size_t bytes);
  // Every element of `value` set to `number` with the backend's "fill" op
  // (any dtype), then synchronised.
  Result<void> fill(ValueId value, double number);
  // Device address of a value (arena values are only meaningful while live
  // within a run); nullptr for an unknown id.
  void* device_pointer(ValueId value) const;

  // Launches nodes [first, end) of the schedule in order, then synchronises.
  // A failed launch names the node, its layer and the plugin's message; an
  // error raised asynchronously is reported at the synchronisation (with
  // profile on, every node is synchronised, so it names the node).
  // Composed: the copies of the range overlap compute (executor_parts.cpp);
  // when run returns, they are finished too, and a failed copy is reported
  // here, naming the value and its two devices.
  Result<void> run(size_t first, size_t end);
  Result<void> run() { return run(0, node_count()); }
  Result<void> synchronize();

  // Next-batch prefetch (staged_inputs.hpp). allow_staging gives an INPUT
  // value a second device buffer, accounted in plan().estimate.inputs and
  // checked against the memory budget (anything else is refused, named).
  // stage copies host bytes into a staging buffer (the host buffer may be
  // reused on return) and enqueues their copy into that second buffer on a
  // copy stream, overlapping whatever runs. use_staged, before the run that
  // reads them, swaps the two buffers of every value staged since the last
  // use and orders the compute stream after the copies (no host wait). A
  // write() of a staged value replaces its pending staged bytes.
  // Composed: each goes to the part that holds the value.
  Result<void> allow_staging(ValueId value);
  Result<void> stage(ValueId value, const void* host, size_t bytes);
  Result<void> use_staged();

  // Composed executors: how copies run (see TransferOptions); rebuilds the
  // copy streams and events. Refused on a single-device executor.
  Result<void> set_transfer_options(TransferOptions options);
  const TransferOptions& transfer_options() const noexcept { return transfer_options_; }
  // The copies of a composed executor, in schedule order.
  const std::vector<ExecutorTransfer>& transfers() const noexcept { return transfers_; }
  // Time copies took since creation, and of it the time someone waited for
  // them (the host, or a device stream: an upper bound); the rest was hidden
  // behind compute. Microseconds.
  double transfer_busy_us() const noexcept;
  double transfer_wait_us() const noexcept;
  // 1 - wait/busy, in [0, 1]; 0 before any copy ran.
  double hidden_transfer_fraction() const noexcept;

  // A composed executor: the first part's plan; parts() has them all.
  const Plan& plan() const noexcept { return parts_.empty() ? plan_ : parts_.front().executor->plan(); }
  size_t node_count() const noexcept { return parts_.empty() ? nodes_.size() : slots_.size(); }
  // The per-device executors of a composed executor (empty otherwise).
  const std::vector<ExecutorPart>& parts() const noexcept { return parts_; }
  // Cross-device copies run, and their bytes, since creation.
  uint64_t transfers_run() const noexcept { return transfers_run_; }
  uint64_t transferred_bytes() const noexcept { return transferred_bytes_; }
  // Bytes this executor allocated (arena, workspace, persistent values not
  // bound externally).
  uint64_t allocated_bytes() const noexcept { return allocated_; }
  // The device's peak allocated bytes as the host's allocator of the device
  // counts them (every executor of the run on it; since the last reset_peak).
  uint64_t measured_peak() const;

  // Profiling (options.profile): per-node accumulated wall time in
  // microseconds (indexed by schedule position) and every execution.
  const std::vector<double>& node_time_us() const noexcept { return node_time_us_; }
  const std::vector<ProfileEvent>& profile_events() const noexcept { return events_; }
  void clear_profile();
  // The instant ProfileEvent times count from (lets callers align their own spans).
  std::chrono::steady_clock::time_point profile_epoch() const noexcept { return epoch_; }

 private:
  struct Buffer {
    const DeviceHandle* device = nullptr;
    void* pointer = nullptr;
    Buffer() = default;
    Buffer(const DeviceHandle& d, void* p) : device(&d), pointer(p) {}
    Buffer(Buffer&& other) noexcept;
    Buffer& operator=(Buffer&&) = delete;
    ~Buffer();
  };
  struct StreamDeleter {
    const tdm_backend_api* api = nullptr;
    void operator()(tdm_stream* stream) const noexcept;
  };
  struct NodeRun {
    std::string name;
    std::string layer;
    std::string op;
    ops::HostKind host = ops::HostKind::None;  // what a host-run node (comm.*) does
    std::optional<KernelBinding> kernel;       // none for a "comm.*" node
    size_t bytes = 0;                          // "comm.*": of the (first) output
    tdm_dtype dtype = TDM_F32;
    std::vector<void*> inputs;  // nullptr for an absent optional input
    std::vector<void*> outputs;
    std::vector<ValueId> reads, writes;  // the values of inputs and outputs
    tdm_phase phase = TDM_PHASE_FORWARD;
    std::vector<GuardedOutput> guarded;  // floating outputs, with ExecutorOptions::numerics
  };

  Executor(const DeviceHandle& device, ExecutorOptions options);
  Executor();  // composed (executor_parts.cpp)
  // A composed executor's global position: a node of a part, or a transfer.
  struct Slot {
    bool transfer = false;
    size_t part = 0;   // or the transfer's index
    size_t local = 0;  // the part's schedule position
  };
  // What a range of a composed run does around its nodes.
  struct RangeActions;
  Result<void> run_parts(size_t first, size_t end);
  Result<void> run_parts_in_order(size_t first, size_t end);
  Result<void> run_parts_overlapped(size_t first, size_t end);
  RangeActions plan_range(size_t first, size_t end) const;
  // plan_range of a range, made the first time it runs (a trainer runs the
  // same few ranges every step).
  const RangeActions& range_actions(size_t first, size_t end);
  Result<void> issue_transfer(size_t t);
  Result<void> transfer_in_order(size_t t);
  Result<void> finish_parts();
  Result<void> start_copies();
  void assign_routes();
  bool part_host_addressable(size_t part) const;
  // Nodes [first, end) launched, without waiting for them (profile: each is).
  Result<void> launch_range(size_t first, size_t end);
  Result<std::pair<Executor*, ValueId>> owner_of(ValueId value) const;
  void collect_profile(size_t part, size_t first, size_t end);
  Result<void> allocate(const Graph& graph);
  Result<void*> alloc(size_t bytes, const std::string& what);
  Result<void> bind_nodes(const Graph& graph, std::vector<std::optional<KernelBinding>> kernels);
  Result<void> launch(size_t position);
  Result<void> communicate(size_t position);
  Result<const ValueStorage*> checked(ValueId value, size_t bytes, const char* action) const;
  std::string node_text(size_t position) const;
  // The node's floating outputs for the numerics guard.
  void guard_outputs(const Graph& graph, NodeRun& run);
  const tdm_backend_api& api() const noexcept { return *device_->backend().backend; }

  const DeviceHandle* device_ = nullptr;
  ExecutorOptions options_;
  // Composed executors only.
  std::vector<ExecutorPart> parts_;
  std::map<std::pair<size_t, size_t>, std::shared_ptr<const RangeActions>> range_actions_;
  std::vector<ExecutorTransfer> transfers_;
  std::vector<Slot> slots_;
  std::map<ValueId, std::pair<size_t, ValueId>> owner_;
  std::vector<size_t> events_taken_;  // per part: profile events already mapped
  uint64_t transfers_run_ = 0, transferred_bytes_ = 0;
  TransferOptions transfer_options_;
  std::unique_ptr<CopyEngine> copies_;                // after parts_: released before their streams
  double retired_busy_us_ = 0, retired_wait_us_ = 0;  // of copy engines replaced by set_transfer_options
  std::optional<StagedInputs> staged_;                // single-device; created by the first allow_staging
  Plan plan_;
  std::unique_ptr<tdm_stream, StreamDeleter> stream_;
  std::vector<Buffer> buffers_;            // everything this executor allocated
  void* arena_ = nullptr;                  // within buffers_
  void* workspace_ = nullptr;              // within buffers_
  std::vector<void*> persistent_;          // by Plan::persistent index
  std::vector<NodeRun> nodes_;             // schedule order; kernels released before buffers
  std::optional<NumericsGuard> numerics_;  // with ExecutorOptions::numerics
  uint64_t allocated_ = 0;
  std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
  std::vector<double> node_time_us_;
  std::vector<ProfileEvent> events_;
};

}  // namespace tandem::host::exec
