// Pipeline parallelism across ranks ([train] pipeline_parallel): the step
// graph is cut into stages of consecutive layers, each rank of a pipeline
// holds and runs one stage, and the stages pass activations forward and
// their gradients back as messages (StageLink, point to point).
//
// Every rank knows the whole cut (RankPipelineLayout, the same on every
// rank: place/stage_cut.hpp makes it from the split graph), so each knows
// in which order every other stage sends, and receives in that order.
// Within a step:
//   - forward and backward run micro-batch by micro-batch in the
//     one-forward-one-backward order of pipeline_schedule.hpp, this stage's
//     units only; a stage holds one instance of its graph per micro-batch in
//     flight (as pipelined_executor.hpp does within a process), the further
//     ones bound to the first instance's persistent values but those of one
//     micro-batch;
//   - a value another stage reads is read into host memory after the
//     segment that made it (on a link that moves device memory, copied
//     into a device buffer: message_buffers.hpp) and its send started
//     right away; the messages the step brings are posted to be received
//     in the order their sender sends them, a window of them ahead (as
//     many as a peer can send before this stage must take one: its
//     micro-batches in flight, plus one), and each is taken right before
//     the segment that reads it (a tied
//     weight's gradient is made early and read late). This thread, the one
//     that computes, starts and completes the transfers itself, asking
//     after them between segments, so that no thread of the link's
//     competes with computing for a core, and a stage that waits for a
//     message asks until it is there. The window keeps the buffers of
//     messages received ahead to what the schedule holds in flight, not
//     the whole step's;
//   - the optimizer phase (and any range run with run(), e.g. an
//     evaluation's forward) runs in schedule order, each message at its
//     position.
// The host's reads are collective over the stages: the stage that holds the
// value broadcasts it, so every rank calls read() for the same values in
// the same order (the trainer does). Writes and fills go to the stage
// that holds the value, and are ignored elsewhere.
//
// Why losses and gradients equal those of one process running the same
// micro-batches one after another: each stage runs the same nodes with the
// same kernels, its backwards in micro-batch order on the same
// accumulators, and the messages carry the bytes unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/device_executor.hpp"
#include "exec/message_buffers.hpp"
#include "exec/micro_batch_pipeline.hpp"
#include "exec/pipeline_schedule.hpp"
#include "exec/stage_link.hpp"

namespace tandem::host::exec {

// One value a stage sends to another.
struct StageMessage {
  enum class When {
    MicroBatch,  // made by forward or backward: once per micro-batch
    BeforeStep,  // nothing in forward or backward writes it (a tied weight): once, first
    AfterStep,   // made by forward or backward, read by the optimizer only: once, last
    InOrder,     // the optimizer phase's: at its schedule position
  };
  When when = When::MicroBatch;
  size_t position = 0;  // of its copy in the global schedule
  int from = 0, to = 0;
  std::string name;  // the global value's
  size_t bytes = 0;
  ValueId source = kNoValue, destination = kNoValue;  // in the sender's and the receiver's graph
  size_t made = 0, read = 0;                          // MicroBatch: the sender's and receiver's segment
};

struct RankPipelineLayout {
  size_t micro_batches = 1;
  // Per stage: segment g is local nodes [bounds[g], bounds[g + 1]); the
  // last bound is where its optimizer phase begins.
  std::vector<std::vector<size_t>> bounds;
  std::vector<std::vector<size_t>> positions;  // per stage: each local node's global position
  PipelineShape shape;
  PipelineOrder order;
  std::vector<StageMessage> messages;  // in the global schedule's order
  // Per stage: its values written for each micro-batch, by index into the
  // micro-batch's inputs (the batch, its labels, dropout's offset).
  std::vector<std::vector<std::pair<ValueId, size_t>>> feeds;
  std::vector<ValueId> inputs;  // those values' global ids, by index (a write() reaches every copy)
  // Global value -> the stage that holds it and its id there (the host's
  // reads, writes and fills).
  std::map<ValueId, std::pair<int, ValueId>> home;

  size_t stages() const { return bounds.size(); }
};

class RankPipelineExecutor final : public Executor, public MicroBatchPipeline {
 public:
  // `first` runs this stage's graph (layout.positions[link.stage()]);
  // `instances` are its further instances for the micro-batches in flight.
  // `link` must outlive the executor.
  RankPipelineExecutor(std::unique_ptr<DeviceExecutor> first,
                       std::vector<std::unique_ptr<DeviceExecutor>> instances, RankPipelineLayout layout,
                       StageLink& link, size_t global_nodes);
  ~RankPipelineExecutor() override;

  Result<void> run_micro_batches(const std::vector<std::vector<ConstBytes>>& inputs,
                                 const std::vector<ValueId>& outputs,
                                 const std::vector<std::vector<MutableBytes>>& results) override;
  size_t micro_batch_count() const noexcept override { return layout_.micro_batches; }

  const RankPipelineLayout& layout() const noexcept { return layout_; }
  int stage() const noexcept { return stage_; }
  // A stage's time in run_micro_batches over the steps so far, and of it
  // the time its segments ran (the rest it waited for other stages).
  struct StageTime {
    double busy_us = 0, wall_us = 0;
    uint64_t steps = 0;
  };
  // Every stage's, by stage: each stage calls it (a broadcast from each).
  Result<std::vector<StageTime>> stage_times();
  // Every stage's segments as they ran (each stage's first million), its
  // times moved to this rank's profile epoch (exact on one machine): each
  // stage calls it; then gathered_spans() has them.
  Result<void> gather_spans();
  const std::vector<PipelineSpan>& gathered_spans() const noexcept { return gathered_; }
  // Whether this stage holds a global value.
  bool holds(ValueId value) const;
  // A value this stage holds, read here alone (read() is collective).
  Result<void> read_held(ValueId value, void* host, size_t bytes);
  // A step failed here while messages with other stages were still on
  // their way: their buffers are left to the link, and peers may wait on
  // this stage. The process should end (tandem train ends a rank whose run
  // failed), so that the launcher ends the job instead of every rank
  // waiting out its timeout.
  bool stranded() const noexcept { return stranded_; }

  Result<void> write(ValueId value, const void* host, size_t bytes) override;
  Result<void> read(ValueId value, void* host, size_t bytes) override;
  Result<void> fill(ValueId value, double number) override;
  void* device_pointer(ValueId value) const override;
  using Executor::run;
  Result<void> run(size_t first, size_t end) override;
  Result<void> synchronize() override;
  Result<void> allow_staging(ValueId value) override;
  Result<void*> reserve_buffer(size_t bytes, const std::string& what) override;
  Result<void> stage(ValueId value, const void* host, size_t bytes) override;
  Result<void> use_staged() override;
  const Plan& plan() const noexcept override { return first_->plan(); }
  size_t node_count() const noexcept override { return global_nodes_; }
  uint64_t allocated_bytes() const noexcept override;
  MemoryEstimate held() const noexcept override { return first_->held(); }
  uint64_t measured_peak() const override { return first_->measured_peak(); }
  uint64_t host_reads() const noexcept override { return first_->host_reads(); }
  uint64_t host_read_bytes() const noexcept override { return first_->host_read_bytes(); }
  uint64_t transfers_run() const noexcept override { return messages_run_; }
  uint64_t transferred_bytes() const noexcept override { return message_bytes_; }
  void clear_profile() override {}
  NodeKernel node_kernel(size_t position) const override;

 protected:
  const NodeProfile& profile() const noexcept override { return profile_; }

 private:
  // A message on its way, with its bytes (rank_pipeline.cpp).
  struct InFlight {
    MessageBytes bytes;
    std::unique_ptr<StageLink::Transfer> transfer;  // null once it finished
    // Asks the link once; true once the message finished.
    Result<bool> ask();
  };
  struct Messages {
    std::vector<InFlight> sent;                               // not yet known to have gone
    std::map<std::pair<size_t, size_t>, InFlight> receiving;  // (micro-batch, message index)
    // Per peer stage: the step's messages not yet posted, in its sending order.
    std::vector<std::deque<std::pair<size_t, size_t>>> unposted;
  };

  DeviceExecutor& instance(size_t micro) const;
  Result<void> run_segment(size_t micro, size_t segment, const std::vector<std::vector<ConstBytes>>& inputs);
  // Message `m` from `executor`'s source on its way, or from the link into
  // `executor`'s destination.
  Result<void> send(const StageMessage& m, DeviceExecutor& executor);
  Result<void> receive(const StageMessage& m, DeviceExecutor& executor);
  // The step's receives, in the order each peer sends; post_ahead() starts
  // them, up to the window per peer; post_one() the peer's next.
  Result<void> post_receives();
  Result<void> post_ahead();
  Result<void> post_one(int peer);
  // Receive `key` (micro-batch, message index) started.
  Result<void> post(std::pair<size_t, size_t> key);
  // A buffer for `m`'s bytes: the link's kind of memory.
  Result<MessageBytes> message_bytes(const StageMessage& m);
  // `m`'s transfer started: a send where this stage sends it, else a receive.
  Result<std::unique_ptr<StageLink::Transfer>> start(const StageMessage& m, MessageBytes& bytes);
  // The step's receives from `peer` posted and not yet taken.
  size_t posted_from(int peer) const;
  // Message `index` of `micro`, once it arrived, into `executor`'s destination.
  Result<void> take(size_t micro, size_t index, DeviceExecutor& executor);
  // Asks after every message on its way, forgetting the sends that went.
  Result<void> progress();
  // Asks after `message` until it finished, within the link's timeout.
  Result<void> wait(InFlight& message, const std::string& what);
  Result<void> run_units(const std::vector<std::vector<ConstBytes>>& inputs,
                         const std::vector<ValueId>& outputs,
                         const std::vector<std::vector<MutableBytes>>& results);
  Result<void> exchange_once(StageMessage::When when);
  // run()'s nodes and messages, in schedule order.
  Result<void> run_in_order(size_t first, size_t end);
  Result<void> finish_sends();
  // After a failure: messages still on their way keep their buffers for
  // ever (the link may still write or read them).
  void abandon_messages();
  // This stage's local nodes within global positions [first, end).
  std::pair<size_t, size_t> local_range(size_t first, size_t end) const;

  std::unique_ptr<DeviceExecutor> first_;
  std::vector<std::unique_ptr<DeviceExecutor>> instances_;
  RankPipelineLayout layout_;
  StageLink& link_;
  int stage_ = 0;
  size_t global_nodes_ = 0;
  // No message; also the micro-batch of one received outside a step.
  static constexpr size_t kNone = ~size_t(0);
  std::unique_ptr<MessageBuffers> buffers_;  // a link that moves device memory: the messages' buffers
  std::unique_ptr<Messages> messages_ = std::make_unique<Messages>();
  std::vector<size_t> receive_window_;  // per peer stage: receives posted ahead
  NodeProfile profile_;                 // none: per-node times are not kept across ranks
  uint64_t messages_run_ = 0, message_bytes_ = 0;
  StageTime time_;
  bool stranded_ = false;
  std::vector<PipelineSpan> spans_, gathered_;
};

}  // namespace tandem::host::exec
