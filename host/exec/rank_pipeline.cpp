// RankPipelineExecutor: this stage's units of the one-forward-one-backward
// order, the messages to and from the other stages, the host's reads
// broadcast from the stage that holds the value.
#include "exec/rank_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace tandem::host::exec {
namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// Spans kept for the trace: a long run's first ones (about 40 MB).
constexpr size_t kMostSpans = size_t(1) << 20;

}  // namespace

// Sends the messages for one peer stage in the order they were queued, on
// a thread of its own: a stage never waits for the receiver to be ready.
class RankPipelineExecutor::Sender {
 public:
  Sender(StageLink& link, int peer) : link_(link), peer_(peer), thread_([this] { loop(); }) {}
  ~Sender() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  void post(std::vector<char> bytes) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(bytes));
    }
    changed_.notify_all();
  }
  // Leaves the thread to itself (it may be blocked on a peer that will
  // never receive): the object must then never be destroyed.
  void abandon() { thread_.detach(); }
  // Waits until everything queued was sent; the first failure since the last drain.
  Result<void> drain() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return queue_.empty() && !sending_; });
    if (!failure_) return {};
    Error e = std::move(*failure_);
    failure_.reset();
    return e;
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::vector<char> bytes = std::move(queue_.front());
      queue_.pop_front();
      sending_ = true;
      lock.unlock();
      // After a failure nothing more is sent: the receiver would take it for the lost message.
      Result<void> sent = failed_ ? Result<void>{} : link_.send(bytes.data(), bytes.size(), peer_);
      lock.lock();
      sending_ = false;
      if (!sent && !failed_) {
        failed_ = true;
        failure_ = sent.error();
      }
      changed_.notify_all();
    }
  }

  StageLink& link_;
  int peer_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::vector<char>> queue_;
  bool sending_ = false, closing_ = false, failed_ = false;
  std::optional<Error> failure_;
  std::thread thread_;  // last: starts once the rest is built
};

// Within run_micro_batches: the messages one peer stage sends this one in a
// step, received on a thread of their own in the order the peer sends them
// (which may differ from the order they are read here: a tied weight's
// gradient is made first and read last), each kept until it is taken.
class RankPipelineExecutor::Receiver {
 public:
  // `expected`: (micro-batch, message index) in the peer's sending order.
  Receiver(StageLink& link, const RankPipelineLayout& layout, int peer,
           std::vector<std::pair<size_t, size_t>> expected)
      : link_(link), layout_(layout), peer_(peer), expected_(std::move(expected)), thread_([this] {
          loop();
        }) {}
  ~Receiver() { thread_.join(); }
  // Whether every expected message came (or receiving failed): the thread is done.
  bool settled() {
    std::lock_guard lock(mutex_);
    return done_;
  }
  // As Sender::abandon.
  void abandon() { thread_.detach(); }
  // Message `index` of micro-batch `micro` (0 for those once a step), once it is here.
  Result<std::vector<char>> take(size_t micro, size_t index) {
    std::unique_lock lock(mutex_);
    const auto key = std::make_pair(micro, index);
    changed_.wait(lock, [&] { return failure_.has_value() || arrived_.count(key) > 0; });
    if (auto it = arrived_.find(key); it != arrived_.end()) {
      std::vector<char> bytes = std::move(it->second);
      arrived_.erase(it);
      return bytes;
    }
    return *failure_;
  }

 private:
  void loop() {
    for (const auto& [micro, index] : expected_) {
      const StageMessage& m = layout_.messages[index];
      std::vector<char> bytes(m.bytes);
      Result<void> r = link_.receive(bytes.data(), bytes.size(), peer_);
      std::lock_guard lock(mutex_);
      if (!r) {
        failure_ = make_error("receiving '" + m.name + "' from pipeline stage " + std::to_string(peer_) +
                                  ": " + r.error().message,
                              r.error().status);
        done_ = true;
        changed_.notify_all();
        return;
      }
      arrived_[{micro, index}] = std::move(bytes);
      changed_.notify_all();
    }
    std::lock_guard lock(mutex_);
    done_ = true;
  }

  StageLink& link_;
  const RankPipelineLayout& layout_;
  int peer_;
  std::vector<std::pair<size_t, size_t>> expected_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<size_t, size_t>, std::vector<char>> arrived_;
  std::optional<Error> failure_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

// What stage `from` sends stage `to` in one step, in its order: the
// messages once a step first, then each micro-batch's as its segments run,
// then those after them.
std::vector<std::pair<size_t, size_t>> step_messages(const RankPipelineLayout& layout, int from, int to) {
  using When = StageMessage::When;
  std::vector<std::pair<size_t, size_t>> out;
  const auto once = [&](When when) {
    for (size_t i = 0; i < layout.messages.size(); ++i)
      if (layout.messages[i].when == when && layout.messages[i].from == from && layout.messages[i].to == to)
        out.emplace_back(0, i);
  };
  once(When::BeforeStep);
  for (const PipelineUnit& u : layout.order.stages[size_t(from)])
    for (size_t g = u.first; g < u.end; ++g)
      for (size_t i = 0; i < layout.messages.size(); ++i) {
        const StageMessage& m = layout.messages[i];
        if (m.when == When::MicroBatch && m.from == from && m.to == to && m.made == g)
          out.emplace_back(u.micro, i);
      }
  once(When::AfterStep);
  return out;
}

RankPipelineExecutor::RankPipelineExecutor(std::unique_ptr<DeviceExecutor> first,
                                           std::vector<std::unique_ptr<DeviceExecutor>> instances,
                                           RankPipelineLayout layout, StageLink& link, size_t global_nodes)
    : first_(std::move(first)),
      instances_(std::move(instances)),
      layout_(std::move(layout)),
      link_(link),
      stage_(link.stage()),
      global_nodes_(global_nodes) {
  profile_.time_us.assign(global_nodes_, 0.0);
  senders_.resize(layout_.stages());
  for (const StageMessage& m : layout_.messages)
    if (m.from == stage_ && !senders_[size_t(m.to)])
      senders_[size_t(m.to)] = std::make_unique<Sender>(link_, m.to);
}

RankPipelineExecutor::~RankPipelineExecutor() {
  if (!stranded_) return;
  for (auto& r : receivers_)
    if (r) r.release()->abandon();
  for (auto& s : senders_)
    if (s) s.release()->abandon();
}

DeviceExecutor& RankPipelineExecutor::instance(size_t micro) const {
  const size_t j = micro % layout_.order.in_flight[size_t(stage_)];
  return j == 0 ? *first_ : *instances_[j - 1];
}

bool RankPipelineExecutor::holds(ValueId value) const {
  auto it = layout_.home.find(value);
  return it != layout_.home.end() && it->second.first == stage_;
}

Result<void> RankPipelineExecutor::read_held(ValueId value, void* host, size_t bytes) {
  if (!holds(value))
    return make_error(
        "stage " + std::to_string(stage_) + " does not hold value " + std::to_string(value) + " (internal)",
        TDM_INTERNAL);
  return first_->read(layout_.home.at(value).second, host, bytes);
}

Result<void> RankPipelineExecutor::send(const StageMessage& m, DeviceExecutor& executor) {
  std::vector<char> bytes(m.bytes);
  if (auto r = executor.read(m.source, bytes.data(), bytes.size()); !r) return r;
  ++messages_run_;
  message_bytes_ += m.bytes;
  senders_[size_t(m.to)]->post(std::move(bytes));
  return {};
}

Result<void> RankPipelineExecutor::receive(const StageMessage& m, DeviceExecutor& executor) {
  std::vector<char> bytes(m.bytes);
  if (auto r = link_.receive(bytes.data(), bytes.size(), m.from); !r)
    return make_error(
        "receiving '" + m.name + "' from pipeline stage " + std::to_string(m.from) + ": " + r.error().message,
        r.error().status);
  return executor.write(m.destination, bytes.data(), bytes.size());
}

Result<void> RankPipelineExecutor::take(size_t micro, size_t index, DeviceExecutor& executor) {
  const StageMessage& m = layout_.messages[index];
  auto bytes = receivers_[size_t(m.from)]->take(micro, index);
  if (!bytes) return bytes.error();
  return executor.write(m.destination, bytes->data(), bytes->size());
}

Result<void> RankPipelineExecutor::drain_senders() {
  Result<void> first_failure;
  for (auto& s : senders_)
    if (s)
      if (auto r = s->drain(); !r && first_failure) first_failure = r.error();
  return first_failure;
}

Result<void> RankPipelineExecutor::exchange_once(StageMessage::When when) {
  for (size_t i = 0; i < layout_.messages.size(); ++i) {
    const StageMessage& m = layout_.messages[i];
    if (m.when != when) continue;
    if (m.from == stage_)
      if (auto r = send(m, *first_); !r) return r;
    if (m.to == stage_)
      if (auto r = take(0, i, *first_); !r) return r;
  }
  return {};
}

Result<void> RankPipelineExecutor::run_segment(size_t micro, size_t segment,
                                               const std::vector<std::vector<ConstBytes>>& inputs) {
  const size_t s = size_t(stage_);
  DeviceExecutor& e = instance(micro);
  if (segment == 0)
    for (const auto& [value, k] : layout_.feeds[s])
      if (auto r = e.write(value, inputs[micro][k].data, inputs[micro][k].bytes); !r) return r;
  for (size_t i = 0; i < layout_.messages.size(); ++i) {
    const StageMessage& m = layout_.messages[i];
    if (m.when == StageMessage::When::MicroBatch && m.to == stage_ && m.read == segment)
      if (auto r = take(micro, i, e); !r) return r;
  }
  const auto started = Clock::now();
  if (auto r = e.run(layout_.bounds[s][segment], layout_.bounds[s][segment + 1]); !r) return r;
  const double took = micros(Clock::now() - started);
  time_.busy_us += took;
  if (spans_.size() < kMostSpans)
    spans_.push_back(
        {s, micro, layout_.shape.stages[s][segment].backward, micros(started - profile_.epoch), took});
  for (const StageMessage& m : layout_.messages)
    if (m.when == StageMessage::When::MicroBatch && m.from == stage_ && m.made == segment)
      if (auto r = send(m, e); !r) return r;
  return {};
}

Result<void> RankPipelineExecutor::run_micro_batches(const std::vector<std::vector<ConstBytes>>& inputs,
                                                     const std::vector<ValueId>& outputs,
                                                     const std::vector<std::vector<MutableBytes>>& results) {
  if (inputs.size() != layout_.micro_batches)
    return make_error("the pipeline runs " + std::to_string(layout_.micro_batches) +
                          " micro-batches a step, not " + std::to_string(inputs.size()) + " (internal)",
                      TDM_INTERNAL);
  const auto started = Clock::now();
  // The step's receivers finish (all their messages in, or failed) before this returns.
  receivers_.clear();
  receivers_.resize(layout_.stages());
  for (int peer = 0; peer < int(layout_.stages()); ++peer)
    if (auto expected = step_messages(layout_, peer, stage_); !expected.empty())
      receivers_[size_t(peer)] = std::make_unique<Receiver>(link_, layout_, peer, std::move(expected));
  Result<void> ran = run_units(inputs, outputs, results);
  if (!ran) {
    // Receivers still waiting for peers that now wait for this stage would
    // wait for ever: they are left to themselves, and so is every sender.
    for (auto& r : receivers_)
      if (r && !r->settled()) stranded_ = true;
    if (stranded_) return ran;
  }
  Result<void> sent = drain_senders();
  receivers_.clear();
  if (!ran) return ran;
  if (!sent) return sent;
  time_.wall_us += micros(Clock::now() - started);
  ++time_.steps;
  // Every stage learns what the micro-batches made where they ended.
  for (size_t k = 0; k < outputs.size(); ++k) {
    auto home = layout_.home.find(outputs[k]);
    if (home == layout_.home.end())
      return make_error("the pipeline has no value " + std::to_string(outputs[k]) + " to read (internal)",
                        TDM_INTERNAL);
    for (size_t m = 0; m < results.size(); ++m)
      if (auto r = link_.broadcast(results[m][k].data, results[m][k].bytes, home->second.first); !r) return r;
  }
  return {};
}

Result<void> RankPipelineExecutor::run_units(const std::vector<std::vector<ConstBytes>>& inputs,
                                             const std::vector<ValueId>& outputs,
                                             const std::vector<std::vector<MutableBytes>>& results) {
  const size_t s = size_t(stage_);
  const size_t segments = layout_.bounds[s].size() - 1;
  if (auto r = exchange_once(StageMessage::When::BeforeStep); !r) return r;
  for (const PipelineUnit& unit : layout_.order.stages[s]) {
    for (size_t g = unit.first; g < unit.end; ++g)
      if (auto r = run_segment(unit.micro, g, inputs); !r) return r;
    if (unit.end != segments) continue;
    for (size_t k = 0; k < outputs.size(); ++k)  // the micro-batch is done here: read what it made
      if (holds(outputs[k]))
        if (auto r = instance(unit.micro)
                         .read(layout_.home.at(outputs[k]).second, results[unit.micro][k].data,
                               results[unit.micro][k].bytes);
            !r)
          return r;
  }
  return exchange_once(StageMessage::When::AfterStep);
}

Result<std::vector<RankPipelineExecutor::StageTime>> RankPipelineExecutor::stage_times() {
  std::vector<StageTime> all(layout_.stages());
  all[size_t(stage_)] = time_;
  for (size_t k = 0; k < all.size(); ++k)
    if (auto r = link_.broadcast(&all[k], sizeof all[k], int(k)); !r) return r.error();
  return all;
}

Result<void> RankPipelineExecutor::gather_spans() {
  gathered_.clear();
  const int64_t epoch_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(profile_.epoch.time_since_epoch()).count();
  for (int k = 0; k < int(layout_.stages()); ++k) {
    int64_t head[2] = {epoch_ns, int64_t(spans_.size())};
    if (auto r = link_.broadcast(head, sizeof head, k); !r) return r;
    std::vector<PipelineSpan> theirs = k == stage_ ? spans_ : std::vector<PipelineSpan>(size_t(head[1]));
    if (auto r = link_.broadcast(theirs.data(), theirs.size() * sizeof(PipelineSpan), k); !r) return r;
    const double shift = double(head[0] - epoch_ns) / 1000.0;  // their epoch after ours
    for (PipelineSpan& span : theirs) span.start_us += shift;
    gathered_.insert(gathered_.end(), theirs.begin(), theirs.end());
  }
  return {};
}

std::pair<size_t, size_t> RankPipelineExecutor::local_range(size_t first, size_t end) const {
  const std::vector<size_t>& p = layout_.positions[size_t(stage_)];
  return {size_t(std::lower_bound(p.begin(), p.end(), first) - p.begin()),
          size_t(std::lower_bound(p.begin(), p.end(), end) - p.begin())};
}

// In schedule order: this stage's nodes, and each message of the range at
// its position (the optimizer phase's, or every one of a range run without
// micro-batches).
Result<void> RankPipelineExecutor::run(size_t first, size_t end) {
  size_t at = first;
  for (const StageMessage& m : layout_.messages) {
    if (m.position < first || m.position >= end || (m.from != stage_ && m.to != stage_)) continue;
    const auto [a, b] = local_range(at, m.position);
    if (a < b)
      if (auto r = first_->run(a, b); !r) return r;
    at = m.position;
    if (auto r = m.from == stage_ ? send(m, *first_) : receive(m, *first_); !r) return r;
  }
  const auto [a, b] = local_range(at, end);
  if (a < b)
    if (auto r = first_->run(a, b); !r) return r;
  return drain_senders();
}

Result<void> RankPipelineExecutor::synchronize() {
  if (auto r = drain_senders(); !r) return r;
  return first_->synchronize();
}

Result<void> RankPipelineExecutor::write(ValueId value, const void* host, size_t bytes) {
  auto input = std::find(layout_.inputs.begin(), layout_.inputs.end(), value);
  if (input != layout_.inputs.end()) {  // the batch: this stage's copies of it, home or not
    for (const auto& [local, k] : layout_.feeds[size_t(stage_)])
      if (k == size_t(input - layout_.inputs.begin()))
        if (auto r = first_->write(local, host, bytes); !r) return r;
    return {};
  }
  auto home = layout_.home.find(value);
  if (home == layout_.home.end())
    return make_error("no stage of the pipeline holds value " + std::to_string(value) + " (internal)",
                      TDM_INTERNAL);
  if (home->second.first != stage_) return {};
  return first_->write(home->second.second, host, bytes);
}

Result<void> RankPipelineExecutor::read(ValueId value, void* host, size_t bytes) {
  auto home = layout_.home.find(value);
  if (home == layout_.home.end())
    return make_error("no stage of the pipeline holds value " + std::to_string(value) + " (internal)",
                      TDM_INTERNAL);
  if (home->second.first == stage_)
    if (auto r = first_->read(home->second.second, host, bytes); !r) return r;
  return link_.broadcast(host, bytes, home->second.first);
}

Result<void> RankPipelineExecutor::fill(ValueId value, double number) {
  auto home = layout_.home.find(value);
  if (home == layout_.home.end() || home->second.first != stage_) return {};
  return first_->fill(home->second.second, number);
}

void* RankPipelineExecutor::device_pointer(ValueId value) const {
  auto home = layout_.home.find(value);
  if (home == layout_.home.end() || home->second.first != stage_) return nullptr;
  return first_->device_pointer(home->second.second);
}

Result<void> RankPipelineExecutor::allow_staging(ValueId) {
  return make_error(
      "a pipeline across ranks writes each micro-batch into the instance that runs it: no staging",
      TDM_UNSUPPORTED);
}

Result<void*> RankPipelineExecutor::reserve_buffer(size_t bytes, const std::string& what) {
  return first_->reserve_buffer(bytes, what);
}

Result<void> RankPipelineExecutor::stage(ValueId, const void*, size_t) {
  return make_error("a pipeline across ranks does not stage inputs (internal)", TDM_INTERNAL);
}

Result<void> RankPipelineExecutor::use_staged() {
  return {};
}

uint64_t RankPipelineExecutor::allocated_bytes() const noexcept {
  uint64_t n = first_->allocated_bytes();
  for (const auto& e : instances_) n += e->allocated_bytes();
  return n;
}

Executor::NodeKernel RankPipelineExecutor::node_kernel(size_t position) const {
  const std::vector<size_t>& p = layout_.positions[size_t(stage_)];
  auto it = std::lower_bound(p.begin(), p.end(), position);
  if (it != p.end() && *it == position) return first_->node_kernel(size_t(it - p.begin()));
  return {"another pipeline stage", ""};
}

}  // namespace tandem::host::exec
