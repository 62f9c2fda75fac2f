#include "train/memory_report.hpp"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "exec/device_executor.hpp"
#include "util/format.hpp"

namespace tandem::host::train {
namespace {

// `training_peak`: what the device's allocator held at most during the
// training steps, before any evaluation executor existed (0: not measured).
void print_plan(const DeviceHandle& device, const exec::Executor& ex, uint64_t budget,
                uint64_t training_peak) {
  const exec::MemoryEstimate& e = ex.plan().estimate;
  const AllocatorStats stats = device.allocator().stats();
  const auto share = [&](uint64_t measured) {
    if (e.total == 0) return std::string();
    char text[48];
    std::snprintf(text, sizeof text, " (%+.1f%% of the plan)",
                  100.0 * (static_cast<double>(measured) - static_cast<double>(e.total)) /
                      static_cast<double>(e.total));
    return std::string(text);
  };
  // Beside each planned category, what the executor's allocations hold for it.
  const exec::MemoryEstimate h = ex.held();
  // The held column is absent where the plan's figure has no allocation of
  // its own (the rounding, spread over every allocation).
  const auto row = [](const char* what, uint64_t planned, std::optional<uint64_t> held = std::nullopt) {
    char text[96];
    std::snprintf(text, sizeof text, "  %-16s %12s %12s", what, human_bytes(planned).c_str(),
                  held ? human_bytes(*held).c_str() : "");
    std::string line = text;
    return line.erase(line.find_last_not_of(' ') + 1);
  };
  std::cout << "memory on " << device.id()
            << ": planned before the first step, and held by the run's allocations\n"
            << "                        planned         held\n"
            << row("parameters", e.parameters, h.parameters) << "\n"
            << row("gradients", e.gradients, h.gradients) << "\n"
            << row("optimizer state", e.optimizer_state, h.optimizer_state) << "\n"
            << row("other state", e.other_state, h.other_state) << "\n"
            << row("inputs", e.inputs, h.inputs) << "\n"
            << row("activations", e.activations, h.activations) << " (reused by liveness; "
            << human_bytes(ex.plan().activations_unshared) << " without reuse"
            << (e.window > 0 ? "; with the streamed parameters' window of at most " + human_bytes(e.window) +
                                   ", their " + human_bytes(e.streamed_home) + " at home in host memory"
                             : std::string())
            << ")\n"
            << row("workspace", e.workspace, h.workspace) << "\n"
            << (e.buffers > 0 ? row("buffers", e.buffers, h.buffers) +
                                    " (data parallelism's gradient bucket, ZeRO's exchange buffer)\n"
                              : std::string())
            << row("block rounding", e.allocator_rounding) << "\n"
            << row("total", e.total, h.total)
            << (budget > 0 ? " of a budget of " + human_bytes(budget) : std::string()) << "\n";
  if (training_peak > 0)
    std::cout << "  measured peak    " << human_bytes(training_peak) << share(training_peak)
              << " during the training steps\n";
  if (const std::optional<uint64_t> used = device.reported_use())
    std::cout << "  device reports   " << human_bytes(*used) << share(*used)
              << " in use now (its free memory at open minus now: library handles and the backend's "
                 "block sizes included)\n";
  std::cout << "  measured peak    " << human_bytes(stats.peak)
            << " with evaluation (its executors share the "
            << "parameters, not the activations)\n"
            << "  allocator        " << stats.allocations << " allocations, " << human_bytes(stats.reserved)
            << " reserved, " << stats.cached_blocks << " cached blocks, fragmentation "
            << static_cast<int>(stats.fragmentation * 100) << "%\n";
}

// The streamed values' copies (exec/streamed_state.hpp), measured.
void report_streaming(const exec::Executor& ex, int64_t steps) {
  const exec::StreamStats stats = ex.stream_stats();
  if (stats.copies == 0 || steps <= 0) return;
  const double n = static_cast<double>(steps);
  std::ostringstream line;
  line << "streamed per training step: " << human_bytes(static_cast<uint64_t>(stats.fetched_bytes / n))
       << " to the device, " << human_bytes(static_cast<uint64_t>(stats.written_home_bytes / n))
       << " home, in " << static_cast<uint64_t>(stats.copies / n) << " copies; " << std::fixed
       << std::setprecision(3) << stats.busy_us / 1000.0 / n << " ms of copying, " << std::setprecision(0)
       << (stats.busy_us > 0 ? 100.0 * (1.0 - std::min(stats.waited_us, stats.busy_us) / stats.busy_us) : 0.0)
       << "% hidden behind compute\n";
  std::cout << line.str();
}

}  // namespace

void RunMemory::note_training_peaks() {
  for (const auto& [id, device] : program_->devices()) training_peaks_[id] = device->allocator().stats().peak;
}

uint64_t RunMemory::budget(const std::string& device) const {
  auto it = budgets_.find(device);
  return it == budgets_.end() ? uint64_t{0} : it->second;
}

uint64_t RunMemory::training_peak(const std::string& device) const {
  auto it = training_peaks_.find(device);
  return it == training_peaks_.end() ? uint64_t{0} : it->second;
}

void RunMemory::record(Progress& progress) const {
  const auto record = [&](const DeviceHandle& device, const exec::Executor& ex) {
    progress.memory(device.id(), ex.plan().estimate.total, training_peak(device.id()),
                    device.allocator().stats().peak);
  };
  const exec::Executor& ex = program_->executor();
  if (ex.parts().empty()) return record(*device_, ex);
  for (const exec::ExecutorPart& part : ex.parts())
    record(*program_->devices().at(part.device), *part.executor);
}

// Recorded when training starts, so that `tandem report` can show where a
// run of several devices put its layers (a run on one device records none).
void RunMemory::record_placement(Progress& progress) const {
  const std::optional<place::Placement>& placement = program_->placement();
  if (!placement || placement->only_on(device_->id())) return;
  using nlohmann::json;
  const std::map<std::string, std::string> devices = program_->layer_devices();
  json layers = json::array(), copies = json::array();
  for (const model::LayerSpec& layer : spec_->layers)
    layers.push_back(json{{"layer", layer.name}, {"device", devices.at(layer.name)}});
  for (const place::Copy& c : placement->copies)
    copies.push_back(json{{"value", c.value},
                          {"bytes", c.bytes},
                          {"from", c.from},
                          {"to", c.to},
                          {"producer_layer", c.producer_layer},
                          {"consumer_layer", c.consumer_layer}});
  progress.record(json{
      {"event", "placement"},
      {"mode", program_->placement_mode()},
      {"devices", placement->devices},
      {"layers", layers},
      {"copies_per_step", placement->copies.size()},
      {"copy_bytes_per_step", placement->copy_bytes()},
      {"copies",
       copies}}.dump());
}

void RunMemory::report(int64_t steps) const {
  const exec::Executor& ex = program_->executor();
  if (ex.parts().empty()) {
    print_plan(*device_, ex, budget(device_->id()), training_peak(device_->id()));
    report_streaming(ex, steps);
    return;
  }
  for (const exec::ExecutorPart& part : ex.parts())
    print_plan(*program_->devices().at(part.device), *part.executor, budget(part.device),
               training_peak(part.device));
  const place::Placement& placement = *program_->placement();
  std::cout << "copies between devices per step: " << placement.copies.size() << " planned ("
            << human_bytes(placement.copy_bytes()) << "), "
            << (steps > 0 ? ex.transfers_run() / static_cast<uint64_t>(steps) : 0) << " run ("
            << human_bytes(steps > 0 ? ex.transferred_bytes() / static_cast<uint64_t>(steps) : 0)
            << ", evaluation included)\n";
  for (const place::Copy& c : placement.copies)
    std::cout << "  " << c.value << " " << human_bytes(c.bytes) << " " << c.from << " -> " << c.to
              << " (layer '" << c.producer_layer << "' -> '" << c.consumer_layer << "')\n";
  if (steps > 0 && ex.transfer_busy_us() > 0) {
    // Evaluation's copies are not in it: the evaluator has executors of its own.
    std::ostringstream line;
    line << std::fixed << std::setprecision(3)
         << "copy time per step: " << ex.transfer_busy_us() / 1000.0 / static_cast<double>(steps) << " ms, "
         << std::setprecision(0) << 100.0 * ex.hidden_transfer_fraction() << "% hidden behind compute\n";
    std::cout << line.str();
  }
  if (const exec::PipelinedExecutor* pipeline = program_->pipeline()) report_pipeline(*pipeline);
}

// Each device's busy and idle time per step, against the bubble of equal
// stages, and what its further micro-batches in flight hold.
void RunMemory::report_pipeline(const exec::PipelinedExecutor& pipeline) const {
  const exec::PipelineStats& stats = pipeline.stats();
  if (stats.steps == 0) return;
  const std::vector<std::string> devices = pipeline.stage_devices();
  const double steps = static_cast<double>(stats.steps);
  const double wall_ms = stats.wall_us / 1000.0 / steps;
  std::ostringstream text;
  text << std::fixed << std::setprecision(1) << "pipeline: " << devices.size() << " stages x "
       << pipeline.layout().micro_batches << " micro-batches, forward and backward " << wall_ms
       << " ms per step; idle " << 100.0 * stats.idle_fraction()
       << "% of device time (bubble of equal stages "
       << 100.0 * exec::bubble_fraction(devices.size(),
                                        pipeline.layout().chunks() * pipeline.layout().micro_batches)
       << "%)\n";
  for (size_t s = 0; s < devices.size(); ++s) {
    const double busy_ms = stats.busy_us[s] / 1000.0 / steps;
    const size_t part = pipeline.layout().stage_part[s];
    const size_t held = pipeline.layout().instances(s);
    text << "  stage " << s << " " << devices[s] << ": busy " << busy_ms << " ms, idle "
         << std::max(0.0, wall_ms - busy_ms) << " ms per step; " << held
         << (held == 1 ? " micro-batch" : " micro-batches") << " in flight";
    if (const uint64_t more = pipeline.instance_bytes(part); more > 0)
      text << " (" << human_bytes(more) << " for those beyond the first)";
    text << "\n";
  }
  std::cout << text.str();
}

// Measured on each rank, against the bubble (P - 1) / (M + P - 1) of equal
// stages that `tandem plan` prints.
void RunMemory::report_stages(const std::vector<exec::RankPipelineExecutor::StageTime>& stages,
                              size_t micro_batches) const {
  if (stages.empty() || stages.front().steps == 0) return;
  double wall = 0, busy = 0;
  for (const auto& s : stages) {
    wall = std::max(wall, s.wall_us / double(s.steps));
    busy += s.busy_us / double(s.steps);
  }
  std::ostringstream text;
  text << std::fixed << std::setprecision(1) << "pipeline: " << stages.size() << " stages (ranks) x "
       << micro_batches << " micro-batches, forward and backward " << wall / 1000.0 << " ms per step; idle "
       << 100.0 * (1.0 - busy / (double(stages.size()) * wall)) << "% of stage time (bubble of equal stages "
       << 100.0 * exec::bubble_fraction(stages.size(), micro_batches) << "%)\n";
  for (size_t k = 0; k < stages.size(); ++k) {
    const double busy_ms = stages[k].busy_us / double(stages[k].steps) / 1000.0;
    text << "  stage " << k << ": busy " << busy_ms << " ms, idle " << std::max(0.0, wall / 1000.0 - busy_ms)
         << " ms per step\n";
  }
  std::cout << text.str();
}

}  // namespace tandem::host::train
