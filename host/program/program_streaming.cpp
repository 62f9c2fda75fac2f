// Program: which layers' parameters, gradients and optimizer state live in
// host memory and are streamed through the device (exec/stream_plan.hpp).
// When a device is full, moving that state costs link time the copy
// stream hides under compute; moving the computation to a slower device
// costs the difference in speed. So a run that does not fit streams before
// anything moves: the fewest layers, largest first, that make it fit.
#include <algorithm>

#include "program/program.hpp"
#include "program/streamed_layers.hpp"
#include "util/format.hpp"
#include "util/logger.hpp"

namespace tandem::host::program {
namespace {

std::vector<StreamableLayer> forced_only(std::vector<StreamableLayer> layers) {
  std::erase_if(layers, [](const StreamableLayer& l) { return !l.forced; });
  return layers;
}

}  // namespace

// Data parallelism all-reduces the gradients the updates read in device
// memory, so they stay there; the parameters and the optimizer state stream.
std::set<ValueId> Program::kept_resident() const {
  if (layout_.data <= 1) return {};
  return {synced_gradients_.begin(), synced_gradients_.end()};
}

void Program::stream_as_asked() {
  streamed_.clear();
  if (options_.mode != lowering::Mode::Train) return;
  const std::vector<StreamableLayer> layers = streamable_layers(model_, spec_, kept_resident());
  streamed_ = values_of(options_.streaming == StreamChoice::Every ? layers : forced_only(layers));
}

Result<std::optional<Program::StreamingFit>> Program::fewest_streamed(place::EstimateInputs in) const {
  if (options_.mode != lowering::Mode::Train || options_.streaming != StreamChoice::Auto ||
      placement_mode_ == "strict")
    return std::optional<StreamingFit>();
  std::vector<StreamableLayer> forced, free;
  for (StreamableLayer& l : streamable_layers(model_, spec_, kept_resident()))
    (l.forced ? forced : free).push_back(std::move(l));
  std::stable_sort(free.begin(), free.end(),
                   [](const StreamableLayer& a, const StreamableLayer& b) { return a.bytes > b.bytes; });
  const auto with = [&](size_t k) -> Result<StreamingFit> {
    StreamingFit fit;
    fit.values = values_of(forced);
    for (size_t i = 0; i < k; ++i) fit.values.insert(free[i].values.begin(), free[i].values.end());
    fit.layers = forced.size() + k;
    fit.of = forced.size() + free.size();
    in.streamed = fit.values;
    auto estimate = place::estimate_plan(model_.graph, nullptr, in);
    if (!estimate) return estimate.error();
    fit.estimate = std::move(*estimate);
    return fit;
  };
  auto all = with(free.size());
  if (!all) return all.error();
  if (all->estimate.over() > 0 || free.empty()) return std::optional<StreamingFit>();
  // Memory falls as layers are added: the least k that fits, by bisection.
  size_t lo = 0, hi = free.size();
  StreamingFit best = std::move(*all);
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    auto fit = with(mid);
    if (!fit) return fit.error();
    if (fit->estimate.over() > 0) {
      lo = mid;
    } else {
      hi = mid;
      best = std::move(*fit);
    }
  }
  return std::optional<StreamingFit>(std::move(best));
}

void Program::adopt(const StreamingFit& fit, const std::string& why) {
  streamed_ = fit.values;
  const place::DeviceEstimate& d = fit.estimate.devices.front();
  log_warning(why + ": streaming " + std::to_string(fit.layers) + " of " + std::to_string(fit.of) +
              " layers' parameters, gradients and optimizer state (" + human_bytes(d.memory.streamed_home) +
              ") from host memory, " + human_bytes(d.memory.total) + " on " + d.device +
              " (tandem plan shows the window and the traffic; --no-stream keeps everything resident)");
}

std::optional<uint64_t> Program::streamed_total() const {
  if (options_.mode != lowering::Mode::Train || (placement_ && !placement_->only_on(device_.id())))
    return std::nullopt;
  place::EstimateInputs in = estimate_inputs(nullptr, nullptr, false);
  in.streamed = values_of(streamable_layers(model_, spec_, kept_resident()));
  auto estimate = place::estimate_plan(model_.graph, nullptr, in);
  if (!estimate || in.streamed.empty()) return std::nullopt;
  return estimate->devices.front().memory.total;
}

Result<void> Program::stream_to_fit() {
  if (automatic_ || (placement_ && !placement_->only_on(device_.id()))) return {};  // placement chose
  if (stages_) return {};  // each rank holds one stage: the plan is per stage
  if (options_.streaming != StreamChoice::Auto || options_.mode != lowering::Mode::Train) return {};
  const place::EstimateInputs in = estimate_inputs(nullptr, nullptr, true);
  auto resident = place::estimate_plan(model_.graph, nullptr, in);
  if (!resident || resident->over() == 0) return {};  // an error shows where the run is planned again
  auto fit = fewest_streamed(in);
  if (!fit) return fit.error();
  if (!*fit) return {};  // does not fit streamed either: the run is refused with the resident figures
  const place::DeviceEstimate& d = resident->devices.front();
  adopt(**fit, device_.id() + " needs " + human_bytes(d.memory.total) + " with everything resident, over " +
                   (options_.memory_budgets.count(device_.id()) > 0 ? "its budget" : "what it has") + " by " +
                   human_bytes(d.over()));
  return {};
}

}  // namespace tandem::host::program
