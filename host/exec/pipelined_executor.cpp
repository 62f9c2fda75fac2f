// PipelinedExecutor: the stages' threads, what they wait for, the copies
// between them; everything else forwarded to the composed executor.
#include "exec/pipelined_executor.hpp"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

namespace tandem::host::exec {
namespace {

using Clock = std::chrono::steady_clock;

// Spans kept for the trace: a long run's first ones (about 40 MB).
constexpr size_t kMostSpans = size_t(1) << 20;

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

Error stopped() {
  return make_error("stopped: another stage of the pipeline failed", TDM_INTERNAL);
}

}  // namespace

double PipelineStats::idle_fraction() const {
  if (busy_us.empty() || wall_us <= 0) return 0.0;
  double busy = 0;
  for (double b : busy_us) busy += b;
  return 1.0 - busy / (static_cast<double>(busy_us.size()) * wall_us);
}

// What one run_micro_batches shares between its stage threads.
struct PipelinedExecutor::Step {
  const std::vector<std::vector<ConstBytes>>& inputs;
  const std::vector<ValueId>& outputs;
  const std::vector<std::vector<MutableBytes>>& results;
  std::mutex mutex;
  std::condition_variable changed;                   // a segment ran, a copy was pulled, or a stage failed
  std::vector<std::vector<std::vector<char>>> done;  // [stage][micro][segment]
  std::vector<std::vector<char>> begun;              // [stage][micro]: its instance holds the micro-batch
  // [pull][micro]: 0 not copied, 1 being copied, 2 copied. Whoever finds
  // it 0 copies: the reading stage before the segment that reads it, or
  // the writing stage right after its segment when the reader's instance
  // already holds that micro-batch (a gradient going back, read late).
  std::vector<std::vector<char>> pulled;
  bool failed = false;
  std::vector<double> busy_us;                   // per stage
  std::vector<std::vector<PipelineSpan>> spans;  // per stage
  Clock::time_point epoch;

  Step(const std::vector<std::vector<ConstBytes>>& in, const std::vector<ValueId>& out,
       const std::vector<std::vector<MutableBytes>>& res)
      : inputs(in), outputs(out), results(res) {}

  // Blocks until `ready()` holds; false when a stage failed meanwhile.
  template <class Ready>
  bool wait(Ready ready) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return failed || ready(); });
    return !failed;
  }
  void mark(char& flag) {
    {
      std::lock_guard lock(mutex);
      flag = 1;
    }
    changed.notify_all();
  }
  // Claims pull `i` of `micro` for the caller to copy: true when it was
  // not copied nor being copied.
  bool claim(size_t i, size_t micro) {
    std::lock_guard lock(mutex);
    if (pulled[i][micro] != 0) return false;
    pulled[i][micro] = 1;
    return true;
  }
  void fail() {
    {
      std::lock_guard lock(mutex);
      failed = true;
    }
    changed.notify_all();
  }
};

PipelinedExecutor::PipelinedExecutor(std::unique_ptr<ComposedExecutor> composed, PipelineLayout layout,
                                     std::vector<std::vector<std::unique_ptr<DeviceExecutor>>> instances)
    : composed_(std::move(composed)), layout_(std::move(layout)), instances_(std::move(instances)) {
  for (size_t s = 0; s < layout_.stage_part.size(); ++s) workers_.push_back(std::make_unique<CopyWorker>());
  stats_.busy_us.assign(layout_.stage_part.size(), 0.0);
}

// The stage threads end before the instances they drive.
PipelinedExecutor::~PipelinedExecutor() {
  workers_.clear();
}

DeviceExecutor& PipelinedExecutor::instance(size_t stage, size_t micro) const {
  const size_t part = layout_.stage_part[stage];
  const size_t j = micro % layout_.instances(stage);
  return j == 0 ? *composed_->parts()[part].executor : *instances_[part][j - 1];
}

std::vector<std::string> PipelinedExecutor::stage_devices() const {
  std::vector<std::string> devices;
  for (size_t part : layout_.stage_part) devices.push_back(composed_->parts()[part].device);
  return devices;
}

uint64_t PipelinedExecutor::instance_bytes(size_t part) const {
  uint64_t bytes = 0;
  if (part < instances_.size())
    for (const auto& e : instances_[part]) bytes += e->allocated_bytes();
  return bytes;
}

Result<void> PipelinedExecutor::set_transfer_options(TransferOptions options) {
  copier_.reset();
  return composed_->set_transfer_options(std::move(options));
}

uint64_t PipelinedExecutor::copies(CopyRoute route) const {
  return copier_ ? copier_->copies(route) : 0;
}

Result<void> PipelinedExecutor::start_copies() {
  if (copier_) return {};
  std::vector<CopyRoute> routes;
  for (const ExecutorTransfer& t : composed_->transfers()) routes.push_back(t.route);
  auto copier =
      PipelineCopies::create(composed_->copy_parts(), composed_->copy_requests(), std::move(routes));
  if (!copier) return copier.error();
  copier_ = std::move(*copier);
  return {};
}

Result<void> PipelinedExecutor::copy_between_first_instances(size_t transfer) {
  const ExecutorTransfer& x = composed_->transfers()[transfer];
  const auto& parts = composed_->parts();
  if (auto r = copier_->copy(transfer, parts[x.to_part].executor->device_pointer(x.to),
                             parts[x.from_part].executor->device_pointer(x.from));
      !r)
    return r;
  ++copies_;
  copied_bytes_ += x.bytes;
  return {};
}

Result<void> PipelinedExecutor::run_micro_batches(const std::vector<std::vector<ConstBytes>>& inputs,
                                                  const std::vector<ValueId>& outputs,
                                                  const std::vector<std::vector<MutableBytes>>& results) {
  const size_t micro = layout_.micro_batches, stages = layout_.stage_part.size();
  if (inputs.size() != micro || results.size() != micro)
    return make_error("a pipelined step takes " + std::to_string(micro) + " micro-batches, not " +
                          std::to_string(inputs.size()) + " (internal)",
                      TDM_INTERNAL);
  if (auto r = composed_->synchronize(); !r) return r;
  if (auto r = start_copies(); !r) return r;
  for (size_t t : layout_.before_step)
    if (auto r = copy_between_first_instances(t); !r) return r;
  Step step(inputs, outputs, results);
  step.done.resize(stages);
  for (size_t s = 0; s < stages; ++s)
    step.done[s].assign(micro, std::vector<char>(layout_.shape.stages[s].size(), 0));
  step.pulled.assign(layout_.pulls.size(), std::vector<char>(micro, 0));
  step.begun.assign(stages, std::vector<char>(micro, 0));
  step.busy_us.assign(stages, 0.0);
  step.spans.resize(stages);
  step.epoch = profile_epoch();
  const auto start = Clock::now();
  std::vector<CopyWorker::Ticket> tickets;
  for (size_t s = 0; s < stages; ++s)
    tickets.push_back(workers_[s]->post([this, &step, s] {
      // However the stage ends short (an error, or an exception the worker
      // turns into one), the others stop waiting for it.
      try {
        auto r = run_stage(step, s);
        if (!r) step.fail();
        return r;
      } catch (...) {
        step.fail();
        throw;
      }
    }));
  // The failure to report: a stage's own, not another's stopping for it.
  Result<void> first;
  for (size_t s = 0; s < stages; ++s)
    if (auto r = workers_[s]->wait(tickets[s]); !r && (first || first.error().message == stopped().message))
      first = r;
  if (!first) return first;
  for (size_t t : layout_.after_step)
    if (auto r = copy_between_first_instances(t); !r) return r;
  for (const PipelineLayout::Pull& pull : layout_.pulls) {
    copies_ += micro;
    copied_bytes_ += micro * composed_->transfers()[pull.transfer].bytes;
  }
  const double wall = micros(Clock::now() - start);
  ++stats_.steps;
  stats_.wall_us += wall;
  for (size_t s = 0; s < stages; ++s) {
    stats_.busy_us[s] += step.busy_us[s];
    if (spans_.size() < kMostSpans) spans_.insert(spans_.end(), step.spans[s].begin(), step.spans[s].end());
  }
  return {};
}

Result<void> PipelinedExecutor::run_stage(Step& step, size_t stage) {
  const size_t segments = layout_.shape.stages[stage].size();
  for (const PipelineUnit& unit : layout_.order.stages[stage]) {
    for (size_t g = unit.first; g < unit.end; ++g) {
      if (g == 0)
        if (auto r = begin_micro_batch(step, stage, unit.micro); !r) return r;
      if (auto r = run_segment(step, stage, unit.micro, g); !r) return r;
    }
    if (unit.end == segments)
      if (auto r = end_micro_batch(step, stage, unit.micro); !r) return r;
  }
  return {};
}

// Before the instance takes micro-batch `micro`: the later stages have
// copied what the micro-batch it held before left them; then its inputs.
Result<void> PipelinedExecutor::begin_micro_batch(Step& step, size_t stage, size_t micro) {
  const size_t held = layout_.instances(stage);
  if (micro >= held) {
    const bool ok = step.wait([&] {
      for (size_t i = 0; i < layout_.pulls.size(); ++i)
        if (layout_.pulls[i].producer.stage == stage && step.pulled[i][micro - held] != 2) return false;
      return true;
    });
    if (!ok) return stopped();
  }
  DeviceExecutor& e = instance(stage, micro);
  for (const PipelineLayout::Feed& f : layout_.feeds)
    if (f.part == layout_.stage_part[stage]) {
      const ConstBytes& in = step.inputs[micro][f.input];
      if (auto r = e.write(f.value, in.data, in.bytes); !r) return r;
    }
  step.mark(step.begun[stage][micro]);
  return {};
}

Result<void> PipelinedExecutor::copy(Step& step, size_t pull, size_t micro) {
  const PipelineLayout::Pull& p = layout_.pulls[pull];
  const ExecutorTransfer& x = composed_->transfers()[p.transfer];
  if (auto r = copier_->copy(p.transfer, instance(p.consumer.stage, micro).device_pointer(x.to),
                             instance(p.producer.stage, micro).device_pointer(x.from));
      !r)
    return r;
  {
    std::lock_guard lock(step.mutex);
    step.pulled[pull][micro] = 2;
  }
  step.changed.notify_all();
  return {};
}

Result<void> PipelinedExecutor::run_segment(Step& step, size_t stage, size_t micro, size_t segment) {
  DeviceExecutor& e = instance(stage, micro);
  for (size_t i = 0; i < layout_.pulls.size(); ++i) {
    const PipelineLayout::Pull& pull = layout_.pulls[i];
    if (!(pull.consumer == SegmentRef{stage, segment})) continue;
    if (!step.wait([&] { return step.done[pull.producer.stage][micro][pull.producer.segment] != 0; }))
      return stopped();
    if (step.claim(i, micro))
      if (auto r = copy(step, i, micro); !r) return r;
    if (!step.wait([&] { return step.pulled[i][micro] == 2; })) return stopped();
  }
  // A value another stage reads, rewritten by this segment: copied first
  // (by this stage when that one holds the micro-batch, else by it).
  for (size_t i = 0; i < layout_.pulls.size(); ++i) {
    const PipelineLayout::Pull& pull = layout_.pulls[i];
    if (pull.producer.stage != stage || pull.rewritten != segment) continue;
    const size_t reader = pull.consumer.stage;
    if (!step.wait([&] {
          return step.pulled[i][micro] == 2 || (step.pulled[i][micro] == 0 && step.begun[reader][micro]);
        }))
      return stopped();
    if (step.claim(i, micro))
      if (auto r = copy(step, i, micro); !r) return r;
    if (!step.wait([&] { return step.pulled[i][micro] == 2; })) return stopped();
  }
  const std::vector<size_t>& bounds = layout_.bounds[stage];
  const auto begin = Clock::now();
  if (auto r = e.run(bounds[segment], bounds[segment + 1]); !r) return r;
  const auto end = Clock::now();
  step.busy_us[stage] += micros(end - begin);
  step.spans[stage].push_back({stage, micro, layout_.shape.stages[stage][segment].backward,
                               micros(begin - step.epoch), micros(end - begin)});
  step.mark(step.done[stage][micro][segment]);
  // What this segment made for a stage that already holds the micro-batch
  // goes there now: that stage may read it late (a gradient going back),
  // and this instance is free for its next micro-batch only once copied.
  for (size_t i = 0; i < layout_.pulls.size(); ++i) {
    const PipelineLayout::Pull& pull = layout_.pulls[i];
    if (!(pull.producer == SegmentRef{stage, segment})) continue;
    bool holds = false;
    {
      std::lock_guard lock(step.mutex);
      holds = step.begun[pull.consumer.stage][micro] != 0;
    }
    if (holds && step.claim(i, micro))
      if (auto r = copy(step, i, micro); !r) return r;
  }
  return {};
}

Result<void> PipelinedExecutor::end_micro_batch(Step& step, size_t stage, size_t micro) {
  DeviceExecutor& e = instance(stage, micro);
  for (size_t k = 0; k < step.outputs.size(); ++k) {
    auto home = composed_->home_of(step.outputs[k]);
    if (!home || home->first != layout_.stage_part[stage]) continue;
    const MutableBytes& out = step.results[micro][k];
    if (auto r = e.read(home->second, out.data, out.bytes); !r) return r;
  }
  return {};
}

// The Executor interface: the first instances, composed.
Result<void> PipelinedExecutor::write(ValueId value, const void* host, size_t bytes) {
  return composed_->write(value, host, bytes);
}
Result<void> PipelinedExecutor::read(ValueId value, void* host, size_t bytes) {
  return composed_->read(value, host, bytes);
}
Result<void> PipelinedExecutor::fill(ValueId value, double number) {
  return composed_->fill(value, number);
}
void* PipelinedExecutor::device_pointer(ValueId value) const {
  return composed_->device_pointer(value);
}
Result<void> PipelinedExecutor::run(size_t first, size_t end) {
  return composed_->run(first, end);
}
Result<void> PipelinedExecutor::synchronize() {
  return composed_->synchronize();
}
Result<void> PipelinedExecutor::allow_staging(ValueId value) {
  return composed_->allow_staging(value);
}
Result<void*> PipelinedExecutor::reserve_buffer(size_t bytes, const std::string& what) {
  return composed_->reserve_buffer(bytes, what);
}
Result<void> PipelinedExecutor::stage(ValueId value, const void* host, size_t bytes) {
  return composed_->stage(value, host, bytes);
}
Result<void> PipelinedExecutor::use_staged() {
  return composed_->use_staged();
}
const Plan& PipelinedExecutor::plan() const noexcept {
  return composed_->plan();
}
size_t PipelinedExecutor::node_count() const noexcept {
  return composed_->node_count();
}
uint64_t PipelinedExecutor::allocated_bytes() const noexcept {
  uint64_t bytes = composed_->allocated_bytes();
  for (size_t p = 0; p < instances_.size(); ++p) bytes += instance_bytes(p);
  return bytes;
}
uint64_t PipelinedExecutor::measured_peak() const {
  return composed_->measured_peak();
}
uint64_t PipelinedExecutor::host_reads() const noexcept {
  return composed_->host_reads();
}
uint64_t PipelinedExecutor::host_read_bytes() const noexcept {
  return composed_->host_read_bytes();
}
void PipelinedExecutor::clear_profile() {
  composed_->clear_profile();
  spans_.clear();
}
Executor::NodeKernel PipelinedExecutor::node_kernel(size_t position) const {
  return composed_->node_kernel(position);
}
const std::vector<ExecutorPart>& PipelinedExecutor::parts() const noexcept {
  return composed_->parts();
}
const std::vector<ExecutorTransfer>& PipelinedExecutor::transfers() const noexcept {
  return composed_->transfers();
}
uint64_t PipelinedExecutor::transfers_run() const noexcept {
  return composed_->transfers_run() + copies_;
}
uint64_t PipelinedExecutor::transferred_bytes() const noexcept {
  return composed_->transferred_bytes() + copied_bytes_;
}
double PipelinedExecutor::transfer_busy_us() const noexcept {
  return composed_->transfer_busy_us();
}
double PipelinedExecutor::transfer_wait_us() const noexcept {
  return composed_->transfer_wait_us();
}
const NodeProfile& PipelinedExecutor::profile() const noexcept {
  return composed_->profile();
}

}  // namespace tandem::host::exec
