// A ComposedExecutor's composition (the global schedule's slots, where each
// copy is issued and waited for, each copy's route), the host's access to
// values forwarded to the part that holds them, and the copies' statistics.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "exec/composed_executor.hpp"

namespace tandem::host::exec {
namespace {

bool sequential_copies_from_environment() {
  const char* v = std::getenv("TANDEM_SEQUENTIAL_COPIES");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// The storage (planner owner) of each present value: what the transfer
// schedule compares, since in-place ops give several values one storage.
std::vector<ValueId> storages(const DeviceExecutor& part, const std::vector<ValueId>& values) {
  std::vector<ValueId> owners;
  for (ValueId v : values)
    if (const ValueStorage* s = v == kNoValue ? nullptr : part.plan().find(v)) owners.push_back(s->owner);
  return owners;
}

}  // namespace

ComposedExecutor::ComposedExecutor(std::vector<ExecutorPart> parts, std::vector<ExecutorTransfer> transfers,
                                   size_t global_nodes, std::map<ValueId, std::pair<size_t, ValueId>> owner)
    : parts_(std::move(parts)), transfers_(std::move(transfers)), owner_(std::move(owner)) {
  schedule(global_nodes);
  for (const ExecutorPart& part : parts_) allocated_ += part.executor->allocated_bytes();
  events_taken_.assign(parts_.size(), 0);
  profile_.time_us.assign(global_nodes, 0.0);
  transfer_options_.sequential = sequential_copies_from_environment();
  assign_routes();
}

ComposedExecutor::~ComposedExecutor() {
  copies_.reset();
}

void ComposedExecutor::schedule(size_t global_nodes) {
  slots_.assign(global_nodes, Slot{});
  std::vector<PartAccess> access(parts_.size());
  for (size_t p = 0; p < parts_.size(); ++p) {
    const DeviceExecutor& part = *parts_[p].executor;
    access[p].positions = parts_[p].positions;
    for (size_t local = 0; local < parts_[p].positions.size(); ++local) {
      slots_[parts_[p].positions[local]] = Slot{false, p, local};
      access[p].reads.push_back(storages(part, part.reads(local)));
      access[p].writes.push_back(storages(part, part.writes(local)));
    }
  }
  std::vector<TransferEnds> ends;
  for (size_t t = 0; t < transfers_.size(); ++t) {
    const ExecutorTransfer& x = transfers_[t];
    slots_[x.position] = Slot{true, t, 0};
    ends.push_back({x.position, x.from_part, x.to_part,
                    parts_[x.from_part].executor->plan().find(x.from)->owner,
                    parts_[x.to_part].executor->plan().find(x.to)->owner});
  }
  const std::vector<TransferPoints> points = schedule_transfers(access, ends);
  for (size_t t = 0; t < transfers_.size(); ++t) transfers_[t].points = points[t];
}

void ComposedExecutor::assign_routes() {
  for (ExecutorTransfer& t : transfers_)
    t.route = route_between(parts_[t.from_part].executor->device(), part_host_addressable(t.from_part),
                            parts_[t.to_part].executor->device(), part_host_addressable(t.to_part));
}

bool ComposedExecutor::part_host_addressable(size_t part) const {
  const ExecutorPart& p = parts_[part];
  if (transfer_options_.as_device.count(p.device) > 0) return false;
  const auto info = p.executor->device().info();
  return info && info->host_addressable;
}

Result<void> ComposedExecutor::set_transfer_options(TransferOptions options) {
  if (copies_) {
    Result<void> finished = copies_->finish();
    retired_busy_us_ += copies_->busy_us();
    retired_wait_us_ += copies_->waited_us();
    copies_.reset();
    if (!finished) return finished;
  }
  transfer_options_ = std::move(options);
  assign_routes();
  return {};
}

std::vector<CopyPart> ComposedExecutor::copy_parts() const {
  std::vector<CopyPart> parts;
  for (size_t p = 0; p < parts_.size(); ++p)
    parts.push_back(
        {&parts_[p].executor->device(), parts_[p].executor->stream(), part_host_addressable(p),
         transfer_options_.stage_as_pinned && transfer_options_.as_device.count(parts_[p].device) > 0});
  return parts;
}

std::vector<CopyRequest> ComposedExecutor::copy_requests() const {
  std::vector<CopyRequest> requests;
  for (const ExecutorTransfer& t : transfers_) {
    // The destination is named value@device (split.hpp): messages say the value.
    const DeviceExecutor& to = *parts_[t.to_part].executor;
    std::string name = to.plan().persistent[to.plan().find(t.to)->persistent].name;
    if (const size_t at = name.rfind('@'); at != std::string::npos) name.resize(at);
    requests.push_back({t.from_part, t.to_part, t.bytes, std::move(name)});
  }
  return requests;
}

Result<void> ComposedExecutor::start_copies() {
  if (copies_) return {};
  auto engine = CopyEngine::create(copy_parts(), copy_requests());
  if (!engine) return engine.error();
  copies_ = std::move(*engine);
  return {};
}

Result<std::pair<DeviceExecutor*, ValueId>> ComposedExecutor::owner_of(ValueId value) const {
  auto it = owner_.find(value);
  if (it == owner_.end())
    return make_error("value " + std::to_string(value) + " is held by no device of this run",
                      TDM_INVALID_ARGUMENT);
  return std::make_pair(parts_[it->second.first].executor.get(), it->second.second);
}

std::optional<std::pair<size_t, ValueId>> ComposedExecutor::home_of(ValueId value) const {
  auto it = owner_.find(value);
  if (it == owner_.end()) return std::nullopt;
  return it->second;
}

void* ComposedExecutor::device_pointer(ValueId value) const {
  auto owner = owner_of(value);
  return owner ? owner->first->device_pointer(owner->second) : nullptr;
}

Result<void> ComposedExecutor::write(ValueId value, const void* host, size_t bytes) {
  auto owner = owner_of(value);
  if (!owner) return owner.error();
  return owner->first->write(owner->second, host, bytes);
}

Result<void> ComposedExecutor::read(ValueId value, void* host, size_t bytes) {
  auto owner = owner_of(value);
  if (!owner) return owner.error();
  return owner->first->read(owner->second, host, bytes);
}

Result<void> ComposedExecutor::fill(ValueId value, double number) {
  auto owner = owner_of(value);
  if (!owner) return owner.error();
  return owner->first->fill(owner->second, number);
}

Result<void> ComposedExecutor::allow_staging(ValueId value) {
  auto owner = owner_of(value);
  if (!owner) return owner.error();
  return owner->first->allow_staging(owner->second);
}

// On the first part's device, whose plan plan() reports.
Result<void*> ComposedExecutor::reserve_buffer(size_t bytes, const std::string& what) {
  return parts_.front().executor->reserve_buffer(bytes, what);
}

Result<void> ComposedExecutor::stage(ValueId value, const void* host, size_t bytes) {
  auto owner = owner_of(value);
  if (!owner) return owner.error();
  return owner->first->stage(owner->second, host, bytes);
}

Result<void> ComposedExecutor::use_staged() {
  for (ExecutorPart& part : parts_)
    if (auto r = part.executor->use_staged(); !r) return r;
  return {};
}

uint64_t ComposedExecutor::measured_peak() const {
  uint64_t total = 0;  // one device each
  for (const ExecutorPart& part : parts_) total += part.executor->measured_peak();
  return total;
}

double ComposedExecutor::transfer_busy_us() const noexcept {
  return retired_busy_us_ + (copies_ ? copies_->busy_us() : 0.0);
}

double ComposedExecutor::transfer_wait_us() const noexcept {
  return retired_wait_us_ + (copies_ ? copies_->waited_us() : 0.0);
}

void ComposedExecutor::clear_profile() {
  for (ExecutorPart& part : parts_) part.executor->clear_profile();
  std::fill(events_taken_.begin(), events_taken_.end(), 0);
  profile_.clear();
}

Executor::NodeKernel ComposedExecutor::node_kernel(size_t position) const {
  if (position >= slots_.size()) return {};
  const Slot& slot = slots_[position];
  if (slot.transfer) {
    const ExecutorTransfer& t = transfers_[slot.part];
    return {parts_[t.from_part].device + " -> " + parts_[t.to_part].device, ""};
  }
  return parts_[slot.part].executor->node_kernel(slot.local);
}

void ComposedExecutor::collect_profile(size_t part, size_t first, size_t end) {
  const DeviceExecutor& e = *parts_[part].executor;
  const std::vector<size_t>& positions = parts_[part].positions;
  for (size_t p = first; p < end; ++p) profile_.time_us[p] = e.node_time_us()[slots_[p].local];
  const double shift = std::chrono::duration<double, std::micro>(e.profile_epoch() - profile_.epoch).count();
  const auto& events = e.profile_events();
  for (size_t i = events_taken_[part]; i < events.size(); ++i)
    profile_.events.push_back({positions[events[i].node], events[i].start_us + shift, events[i].dur_us});
  events_taken_[part] = events.size();
}

}  // namespace tandem::host::exec
