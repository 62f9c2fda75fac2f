// Runs a planned graph on one device: prepared kernels, one arena for the
// transient values, one workspace, one allocation for the persistent
// values, and one stream on which nodes run in schedule order. An input may
// be staged: the next batch's copy into a second device buffer runs while
// the current step does (staged_inputs.hpp); the second buffer is part of
// the plan's estimate. Streamed values (ExecutorOptions::streamed) live in
// host memory and visit slots of the arena around the nodes that touch them
// (streamed_state.hpp); the host's reads and writes of them go to that home.
//
// A ComposedExecutor drives several of these as its parts: it launches
// their nodes without waiting (launch_range) and orders its copies with
// their streams, so those few internals are public (the "As a part" block).
//
// Files: device_executor.cpp (creation, memory, streamed values' homes),
// device_executor_run.cpp (launching nodes), device_executor_values.cpp (the
// host's access to values: copies, fill, staged inputs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "exec/copy_worker.hpp"
#include "exec/device_objects.hpp"
#include "exec/executor.hpp"
#include "exec/kernel_binding.hpp"
#include "exec/staged_inputs.hpp"
#include "exec/streamed_state.hpp"
#include "ops/op_table.hpp"

namespace tandem::host::exec {

class DeviceExecutor final : public Executor {
 public:
  static Result<std::unique_ptr<DeviceExecutor>> create(const DeviceHandle& device, const Graph& graph,
                                                        ExecutorOptions options = {});
  // Waits for the stream, then releases kernels, frees buffers, destroys it.
  ~DeviceExecutor() override;

  Result<void> write(ValueId value, const void* host, size_t bytes) override;
  Result<void> read(ValueId value, void* host, size_t bytes) override;
  Result<void> fill(ValueId value, double number) override;
  // fill for a backend without a "fill" kernel: copies from host memory.
  Result<void> fill_by_copies(ValueId value, double number);
  void* device_pointer(ValueId value) const override;
  void* stream_home(ValueId value) const override;
  StreamStats stream_stats() const override;

  using Executor::run;
  Result<void> run(size_t first, size_t end) override;
  Result<void> synchronize() override;
  tdm_stream* compute_stream() const noexcept override { return stream_.get(); }
  // Nodes [first, end) launched, without waiting for them (profile: each is).
  Result<void> launch_range(size_t first, size_t end) override;

  Result<void> allow_staging(ValueId value) override;
  Result<void*> reserve_buffer(size_t bytes, const std::string& what) override;
  Result<void> stage(ValueId value, const void* host, size_t bytes) override;
  Result<void> use_staged() override;

  const Plan& plan() const noexcept override { return plan_; }
  size_t node_count() const noexcept override { return nodes_.size(); }
  uint64_t allocated_bytes() const noexcept override { return allocated_; }
  MemoryEstimate held() const noexcept override { return held_; }
  uint64_t measured_peak() const override;
  uint64_t host_reads() const noexcept override { return host_reads_; }
  uint64_t host_read_bytes() const noexcept override { return host_read_bytes_; }
  void clear_profile() override { profile_.clear(); }
  NodeKernel node_kernel(size_t position) const override;

  // As a part of a ComposedExecutor.
  const DeviceHandle& device() const noexcept { return *device_; }
  // Where the nodes run: copies to and from this part are ordered with it.
  tdm_stream* stream() const noexcept { return stream_.get(); }
  // The values node `position` (in this executor's schedule) reads and
  // writes, kNoValue for an absent optional input.
  const std::vector<ValueId>& reads(size_t position) const { return nodes_[position].reads; }
  const std::vector<ValueId>& writes(size_t position) const { return nodes_[position].writes; }
  tdm_phase phase(size_t position) const { return nodes_[position].phase; }

 protected:
  const NodeProfile& profile() const noexcept override { return profile_; }

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
    std::vector<GuardedOutput> guarded;  // outputs, with ExecutorOptions::numerics
    size_t whole_bytes = 0;              // "zero.*": of the whole tensor of the shards
    // ZeRO's overlapped exchanges (planner.hpp overlapped_exchange): its
    // padding goes through the exchange buffer; `in_flight`: it runs while
    // later nodes do (not where it reads a streamed value, whose slot the
    // arena may give away after the node). A zero.wait: its exchange's position.
    bool staged_exchange = false;
    bool in_flight = false;
    size_t exchange = 0;
  };
  // ZeRO's exchanges in flight, in launch order (device_executor_zero.cpp).
  struct Exchanges {
    bool on_streams = false;  // else on `worker`
    std::optional<CopyWorker> worker;
    OwnedStream stream;                            // the exchanges' copies (and collectives, on_streams)
    OwnedEvent ready;                              // on_streams: the compute stream reached a launch
    std::map<size_t, OwnedEvent> done;             // on_streams: by launch position
    std::map<size_t, CopyWorker::Ticket> tickets;  // the worker's, by launch position
    std::set<size_t> pending;                      // on_streams: launched, not yet waited for
    void* staging = nullptr;                       // within buffers_
  };

  DeviceExecutor(const DeviceHandle& device, ExecutorOptions options);
  // A plan over the memory budget is refused before anything is allocated.
  Result<void> check_budget(const MemoryEstimate& estimate) const;
  Result<void> create_stream();
  Result<void> allocate(const Graph& graph);
  Result<void> allocate_persistent();
  // The streamed values' homes in host memory (pinned where the device has
  // it) and their copies' machinery; after the arena.
  Result<void> allocate_streaming();
  // Where node `position` finds value `id`: a streamed value's slot of the
  // residency that covers the node, else device_pointer.
  void* node_pointer(ValueId id, size_t position) const;
  Result<void> launch_timed(size_t position);
  // `counted`: what allocated_bytes() adds, when not all of `bytes` are
  // values (the persistent block's alignment is the plan's rounding).
  Result<void*> alloc(size_t bytes, const std::string& what, std::optional<size_t> counted = std::nullopt);
  Result<void> bind_nodes(const Graph& graph, std::vector<std::optional<KernelBinding>> kernels);
  // The node's floating outputs for the numerics guard.
  void guard_outputs(const Graph& graph, NodeRun& run);
  Result<void> launch(size_t position);
  Result<void> communicate(size_t position);
  // A "zero.*" node (device_executor_zero.cpp).
  Result<void> share(size_t position);
  // The exchanges' machinery and buffer, where the graph has overlapped ones.
  Result<void> prepare_exchanges(const Graph& graph, size_t staging_bytes);
  // Node `position`'s collectives and copies on `stream` (`native`: its
  // handle for the comm plugin; nullptr: they run now, on this thread),
  // padding through `scratch`.
  Result<void> exchange(size_t position, tdm_stream* stream, void* native, void* scratch) const;
  Result<void> launch_exchange(size_t position);
  Result<void> wait_exchange(size_t position);
  // Every exchange in flight has ended (before one that runs in place, and
  // at the end of a range); the first failure.
  Result<void> drain_exchanges();
  Result<const ValueStorage*> checked(ValueId value, size_t bytes, const char* action) const;
  std::string node_text(size_t position) const;
  const tdm_backend_api& api() const noexcept { return *device_->backend().backend; }

  const DeviceHandle* device_ = nullptr;
  ExecutorOptions options_;
  std::optional<StagedInputs> staged_;  // created by the first allow_staging
  Plan plan_;
  std::unique_ptr<tdm_stream, StreamDeleter> stream_;
  std::vector<Buffer> buffers_;    // everything this executor allocated
  void* arena_ = nullptr;          // within buffers_
  void* workspace_ = nullptr;      // within buffers_
  std::vector<void*> persistent_;  // by Plan::persistent index
  std::vector<bool> external_;     // by Plan::persistent index: ExecutorOptions::external
  std::vector<void*> home_;        // by Plan::persistent index: a streamed value's home
  HostStaging home_block_;         // the homes this executor owns
  std::map<std::pair<ValueId, size_t>, size_t> slot_of_;  // (streamed owner, position) -> arena offset
  std::unique_ptr<StreamedState> streamed_;               // released first: its copies use all of the above
  std::vector<NodeRun> nodes_;                            // schedule order; kernels released before buffers
  std::vector<unsigned char> zero_padding_;               // zeros for the zero.* nodes' padding
  std::unique_ptr<Exchanges> exchanges_;                  // released first: its jobs read nodes_
  std::optional<NumericsGuard> numerics_;                 // with ExecutorOptions::numerics
  uint64_t allocated_ = 0;
  MemoryEstimate held_;  // held(): what alloc() gave, by what it holds
  uint64_t host_reads_ = 0, host_read_bytes_ = 0;
  NodeProfile profile_;
};

}  // namespace tandem::host::exec
