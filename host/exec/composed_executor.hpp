// A graph placed on several devices run as one executor: one
// DeviceExecutor per device ("parts", split.hpp), the global schedule
// interleaving their nodes with the copies between them.
//
// Overlap: each copy is issued right after the node
// that produces its source and waited for right before the first node that
// reads it, on copy streams with events, or on a copy thread between
// host-addressable devices (composed_executor_run.cpp, transfer_schedule.hpp,
// copy_engine.hpp); run() still returns with everything finished. Values
// the host addresses (write, read, fill, staging) are forwarded to the part
// that holds them (their home).
//
// Files: composed_executor.cpp (composition, forwarding, copy statistics),
// composed_executor_run.cpp (running a range of the global schedule).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "exec/copy_engine.hpp"
#include "exec/device_executor.hpp"
#include "exec/executor.hpp"

namespace tandem::host::exec {

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
  // The as_device parts' copies to and from host memory go through a
  // staging buffer on the copy thread, as a GPU's with pinned memory do
  // (copy_engine.hpp), instead of straight into the other part's memory.
  bool stage_as_pinned = false;
};

class ComposedExecutor final : public Executor {
  friend class PipelinedExecutor;  // forwards its profile(), copies between its parts' instances

 public:
  // See Executor::compose.
  ComposedExecutor(std::vector<ExecutorPart> parts, std::vector<ExecutorTransfer> transfers,
                   size_t global_nodes, std::map<ValueId, std::pair<size_t, ValueId>> owner);
  // Waits for the copies in flight (they use the parts' buffers and
  // streams), then destroys the parts, each waiting for its stream.
  ~ComposedExecutor() override;

  Result<void> write(ValueId value, const void* host, size_t bytes) override;
  Result<void> read(ValueId value, void* host, size_t bytes) override;
  Result<void> fill(ValueId value, double number) override;
  void* device_pointer(ValueId value) const override;

  using Executor::run;
  Result<void> run(size_t first, size_t end) override;
  // Every part synchronised and every copy issued finished.
  Result<void> synchronize() override;

  Result<void> allow_staging(ValueId value) override;
  Result<void*> reserve_buffer(size_t bytes, const std::string& what) override;
  Result<void> stage(ValueId value, const void* host, size_t bytes) override;
  Result<void> use_staged() override;

  const Plan& plan() const noexcept override { return parts_.front().executor->plan(); }
  size_t node_count() const noexcept override { return slots_.size(); }
  // What the parts had allocated when composed (a staged input's second
  // buffer, allocated later, shows in its part's figure only).
  uint64_t allocated_bytes() const noexcept override { return allocated_; }
  uint64_t measured_peak() const override;
  uint64_t host_reads() const noexcept override {
    uint64_t n = 0;
    for (const ExecutorPart& p : parts_) n += p.executor->host_reads();
    return n;
  }
  uint64_t host_read_bytes() const noexcept override {
    uint64_t n = 0;
    for (const ExecutorPart& p : parts_) n += p.executor->host_read_bytes();
    return n;
  }
  void clear_profile() override;
  NodeKernel node_kernel(size_t position) const override;

  const std::vector<ExecutorPart>& parts() const noexcept override { return parts_; }
  const std::vector<ExecutorTransfer>& transfers() const noexcept override { return transfers_; }
  uint64_t transfers_run() const noexcept override { return transfers_run_; }
  uint64_t transferred_bytes() const noexcept override { return transferred_bytes_; }
  double transfer_busy_us() const noexcept override;
  double transfer_wait_us() const noexcept override;

  // The part that holds a global value (its home) and the part's value;
  // nullopt for a value no part holds.
  std::optional<std::pair<size_t, ValueId>> home_of(ValueId value) const;

  // How copies run (see TransferOptions): waits for the copies in flight,
  // then re-routes every transfer; copy streams and events are rebuilt at
  // the next run.
  Result<void> set_transfer_options(TransferOptions options);

 protected:
  const NodeProfile& profile() const noexcept override { return profile_; }

 private:
  // A global schedule position: a node of a part, or a transfer.
  struct Slot {
    bool transfer = false;
    size_t part = 0;   // or the transfer's index
    size_t local = 0;  // the part's schedule position
  };
  // What a range of a run does around its nodes (composed_executor_run.cpp).
  struct RangeActions;

  // Fills slots_ and tells where each transfer is issued and waited for.
  void schedule(size_t global_nodes);
  void assign_routes();
  bool part_host_addressable(size_t part) const;
  // The parts and transfers as the copies see them (copy_engine.hpp), by
  // the transfer options in force.
  std::vector<CopyPart> copy_parts() const;
  std::vector<CopyRequest> copy_requests() const;
  Result<void> start_copies();
  // The part that holds a global value, and the value there.
  Result<std::pair<DeviceExecutor*, ValueId>> owner_of(ValueId value) const;
  Result<void> run_in_order(size_t first, size_t end);
  Result<void> run_overlapped(size_t first, size_t end);
  RangeActions plan_range(size_t first, size_t end) const;
  // plan_range of a range, made the first time it runs (a trainer runs the
  // same few ranges every step).
  const RangeActions& range_actions(size_t first, size_t end);
  Result<void> issue_transfer(size_t t);
  Result<void> transfer_in_order(size_t t);
  // Part `part`'s profile of global positions [first, end) copied into ours.
  void collect_profile(size_t part, size_t first, size_t end);

  std::vector<ExecutorPart> parts_;
  std::vector<ExecutorTransfer> transfers_;
  std::vector<Slot> slots_;
  std::map<ValueId, std::pair<size_t, ValueId>> owner_;
  std::map<std::pair<size_t, size_t>, std::shared_ptr<const RangeActions>> range_actions_;
  TransferOptions transfer_options_;
  std::unique_ptr<CopyEngine> copies_;                // after parts_: released before their streams
  double retired_busy_us_ = 0, retired_wait_us_ = 0;  // of copy engines replaced by set_transfer_options
  uint64_t transfers_run_ = 0, transferred_bytes_ = 0;
  uint64_t allocated_ = 0;
  std::vector<size_t> events_taken_;  // per part: profile events already mapped
  NodeProfile profile_;
};

}  // namespace tandem::host::exec
