// RankPipelineExecutor: this stage's units of the one-forward-one-backward
// order, the messages to and from the other stages, the host's reads
// broadcast from the stage that holds the value.
#include "exec/rank_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <map>

namespace tandem::host::exec {
namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// Spans kept for the trace: a long run's first ones (about 40 MB).
constexpr size_t kMostSpans = size_t(1) << 20;

}  // namespace

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
  if (link.moves_device_memory()) buffers_ = std::make_unique<MessageBuffers>(*first_);
  profile_.time_us.assign(global_nodes_, 0.0);
  // A peer runs at most as many micro-batches ahead of this stage as the
  // schedule holds in flight anywhere: a window of that many, plus one, of
  // its messages per micro-batch is posted before they are needed.
  const auto& in_flight = layout_.order.in_flight;
  const size_t ahead = (in_flight.empty() ? 1 : *std::max_element(in_flight.begin(), in_flight.end())) + 1;
  receive_window_.assign(layout_.stages(), 1);
  for (const StageMessage& m : layout_.messages)
    if (m.to == stage_ && m.when == StageMessage::When::MicroBatch) receive_window_[size_t(m.from)] += ahead;
}

RankPipelineExecutor::~RankPipelineExecutor() {
  abandon_messages();
}

void RankPipelineExecutor::abandon_messages() {
  bool on_the_way = false;
  for (const InFlight& m : messages_->sent) on_the_way |= m.transfer != nullptr;
  for (const auto& [key, m] : messages_->receiving) on_the_way |= m.transfer != nullptr;
  if (!on_the_way) return;
  stranded_ = true;
  (void)messages_.release();
  messages_ = std::make_unique<Messages>();
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

Result<MessageBytes> RankPipelineExecutor::message_bytes(const StageMessage& m) {
  if (!buffers_) return MessageBytes(m.bytes);
  auto buffer = buffers_->take(m.bytes, m.name);
  if (!buffer) return buffer.error();
  return MessageBytes(*buffers_, *buffer, m.bytes);
}

Result<std::unique_ptr<StageLink::Transfer>> RankPipelineExecutor::start(const StageMessage& m,
                                                                         MessageBytes& bytes) {
  const bool sending = m.from == stage_;
  const int peer = sending ? m.to : m.from;
  auto started = !bytes.on_device() ? (sending ? link_.start_send(bytes.data(), bytes.size(), peer)
                                               : link_.start_receive(bytes.data(), bytes.size(), peer))
                 : sending          ? link_.start_device_send(bytes.data(), bytes.size(), peer)
                                    : link_.start_device_receive(bytes.data(), bytes.size(), peer);
  if (started) return started;
  return make_error(std::string(sending ? "sending '" : "receiving '") + m.name +
                        (sending ? "' to" : "' from") + " pipeline stage " + std::to_string(peer) + ": " +
                        started.error().message,
                    started.error().status);
}

Result<void> RankPipelineExecutor::send(const StageMessage& m, DeviceExecutor& executor) {
  auto bytes = message_bytes(m);
  if (!bytes) return bytes.error();
  InFlight out{std::move(*bytes), nullptr};
  if (auto r = out.bytes.on_device()
                   ? copy_on_device(executor, out.bytes.data(), executor.device_pointer(m.source), m.bytes,
                                    true, m.name)
                   : executor.read(m.source, out.bytes.data(), m.bytes);
      !r)
    return r;
  auto started = start(m, out.bytes);
  if (!started) return started.error();
  out.transfer = std::move(*started);
  ++messages_run_;
  message_bytes_ += m.bytes;
  messages_->sent.push_back(std::move(out));
  return {};
}

Result<void> RankPipelineExecutor::receive(const StageMessage& m, DeviceExecutor& executor) {
  // Kept with the step's receives, so that a failed wait leaves it to abandon_messages().
  const std::pair<size_t, size_t> key{kNone, size_t(&m - layout_.messages.data())};
  if (auto r = post(key); !r) return r;
  return take(key.first, key.second, executor);
}

Result<void> RankPipelineExecutor::post_receives() {
  messages_->unposted.assign(layout_.stages(), {});
  for (int peer = 0; peer < int(layout_.stages()); ++peer)
    for (const auto& key : step_messages(layout_, peer, stage_))
      messages_->unposted[size_t(peer)].push_back(key);
  return post_ahead();
}

size_t RankPipelineExecutor::posted_from(int peer) const {
  size_t n = 0;
  for (const auto& [key, m] : messages_->receiving)
    n += key.first != kNone && layout_.messages[key.second].from == peer;
  return n;
}

Result<void> RankPipelineExecutor::post_ahead() {
  for (int peer = 0; peer < int(layout_.stages()); ++peer)
    while (!messages_->unposted[size_t(peer)].empty() && posted_from(peer) < receive_window_[size_t(peer)])
      if (auto r = post_one(peer); !r) return r;
  return {};
}

Result<void> RankPipelineExecutor::post_one(int peer) {
  const auto key = messages_->unposted[size_t(peer)].front();
  messages_->unposted[size_t(peer)].pop_front();
  return post(key);
}

Result<void> RankPipelineExecutor::post(std::pair<size_t, size_t> key) {
  const StageMessage& m = layout_.messages[key.second];
  auto bytes = message_bytes(m);
  if (!bytes) return bytes.error();
  InFlight& in = messages_->receiving[key];
  in.bytes = std::move(*bytes);
  auto started = start(m, in.bytes);
  if (!started) {
    messages_->receiving.erase(key);
    return started.error();
  }
  in.transfer = std::move(*started);
  return {};
}

Result<void> RankPipelineExecutor::take(size_t micro, size_t index, DeviceExecutor& executor) {
  const StageMessage& m = layout_.messages[index];
  // A message read before those the window holds: everything its peer sends before it is posted first.
  if (micro != kNone)
    while (messages_->receiving.count({micro, index}) == 0 && !messages_->unposted[size_t(m.from)].empty())
      if (auto r = post_one(m.from); !r) return r;
  auto it = messages_->receiving.find({micro, index});
  if (it == messages_->receiving.end())
    return make_error("pipeline stage " + std::to_string(stage_) + " takes '" + m.name + "' of micro-batch " +
                          std::to_string(micro) + " twice, or one it never expected (internal)",
                      TDM_INTERNAL);
  if (auto r = wait(it->second, "'" + m.name + "' from pipeline stage " + std::to_string(m.from)); !r)
    return r;
  MessageBytes& bytes = it->second.bytes;
  auto written = bytes.on_device() ? copy_on_device(executor, executor.device_pointer(m.destination),
                                                    bytes.data(), m.bytes, false, m.name)
                                   : executor.write(m.destination, bytes.data(), m.bytes);
  messages_->receiving.erase(it);
  if (micro == kNone || !written) return written;
  return post_ahead();
}

Result<bool> RankPipelineExecutor::InFlight::ask() {
  if (!transfer) return true;
  auto done = transfer->finished();
  if (!done) return done.error();
  if (*done) transfer.reset();
  return *done;
}

Result<void> RankPipelineExecutor::progress() {
  auto& sent = messages_->sent;
  for (InFlight& m : sent)
    if (auto r = m.ask(); !r) return r.error();
  std::erase_if(sent, [](const InFlight& m) { return m.transfer == nullptr; });
  for (auto& [key, m] : messages_->receiving)
    if (auto r = m.ask(); !r) return r.error();
  return {};
}

Result<void> RankPipelineExecutor::wait(InFlight& message, const std::string& what) {
  if (!message.transfer) return {};
  if (auto r = wait_until_finished(*message.transfer, link_.timeout_seconds(), stage_, what); !r) return r;
  message.transfer.reset();
  return {};
}

Result<void> RankPipelineExecutor::finish_sends() {
  for (InFlight& m : messages_->sent)
    if (auto r = wait(m, "a message it sent to reach its stage"); !r) return r;
  messages_->sent.clear();
  return {};
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
  if (auto r = progress(); !r) return r;
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
  Result<void> ran = post_receives();
  if (ran) ran = run_units(inputs, outputs, results);
  if (ran) ran = finish_sends();
  if (!ran) {
    abandon_messages();
    return ran;
  }
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
  Result<void> ran = run_in_order(first, end);
  if (ran) ran = finish_sends();
  if (!ran) abandon_messages();
  return ran;
}

Result<void> RankPipelineExecutor::run_in_order(size_t first, size_t end) {
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
  if (a < b) return first_->run(a, b);
  return {};
}

Result<void> RankPipelineExecutor::synchronize() {
  if (auto r = finish_sends(); !r) {
    abandon_messages();
    return r;
  }
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
