#include "train/profile_report.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "checkpoint/atomic_file.hpp"
#include "exec/pipelined_executor.hpp"
#include "exec/rank_pipeline.hpp"

namespace tandem::host::train {
namespace {

const char* phase_name(tdm_phase p) {
  switch (p) {
    case TDM_PHASE_FORWARD:
      return "forward";
    case TDM_PHASE_BACKWARD:
      return "backward";
    default:
      return "optimizer";
  }
}

double us_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

}  // namespace

void ProfileRecorder::data_wait(std::chrono::steady_clock::time_point begin,
                                std::chrono::steady_clock::time_point end) {
  if (enabled_) waits_.push_back({begin, end});
}

void ProfileRecorder::all_reduce(std::chrono::steady_clock::time_point begin,
                                 std::chrono::steady_clock::time_point end, size_t bytes,
                                 std::chrono::steady_clock::time_point backward_done) {
  if (enabled_) all_reduces_.push_back({{begin, end}, bytes, backward_done});
}

namespace {

// A pipelined run: each stage's forward and backward of every micro-batch,
// on a track per device.
// Pipeline parallelism: a track per stage's rank, gathered on this one.
void add_pipeline_spans(const exec::Executor& executor, nlohmann::json& events,
                        const std::function<int(const std::string&, const std::string&)>& track_of) {
  const auto* pipeline = dynamic_cast<const exec::PipelinedExecutor*>(&executor);
  const auto* ranks = dynamic_cast<const exec::RankPipelineExecutor*>(&executor);
  if (pipeline == nullptr && ranks == nullptr) return;
  const std::vector<std::string> stages =
      pipeline != nullptr ? pipeline->stage_devices() : std::vector<std::string>();
  for (const exec::PipelineSpan& p : pipeline != nullptr ? pipeline->spans() : ranks->gathered_spans()) {
    const std::string track =
        pipeline != nullptr ? stages[p.stage] + " pipeline" : "pipeline stage " + std::to_string(p.stage);
    events.push_back(
        {{"ph", "X"},
         {"pid", 1},
         {"tid", track_of(track, pipeline != nullptr ? track + " stage " + std::to_string(p.stage)
                                                     : track + " (its rank in the pipeline)")},
         {"name", (p.backward ? "backward " : "forward ") + std::to_string(p.micro)},
         {"cat", p.backward ? "backward" : "forward"},
         {"ts", p.start_us},
         {"dur", p.dur_us},
         {"args", {{"micro_batch", p.micro}}}});
  }
}

}  // namespace

Result<void> ProfileRecorder::write(const std::string& path, const Graph& graph,
                                    const exec::Executor& executor, const std::string& device) const {
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", "tandem"}}}});
  events.push_back({{"ph", "M"},
                    {"name", "thread_name"},
                    {"pid", 1},
                    {"tid", 2},
                    {"args", {{"name", "data loader wait"}}}});
  // One track per device a node ran on (copies between devices on theirs),
  // after the data and all-reduce tracks; in order of first appearance.
  std::map<std::string, int> tracks;
  auto track_of = [&](const std::string& where, const std::string& label = "") {
    auto [it, added] = tracks.emplace(where.empty() ? device : where, int(tracks.size()) + 4);
    if (added)
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", 1},
                        {"tid", it->second},
                        {"args", {{"name", label.empty() ? it->first + " stream 0" : label}}}});
    return it->second;
  };
  for (const exec::ProfileEvent& e : executor.profile_events()) {
    const Node& n = *graph.node_at(e.node);
    const exec::Executor::NodeKernel where = executor.node_kernel(e.node);
    json args = {
        {"node", n.name}, {"layer", n.layer}, {"device", where.device.empty() ? device : where.device}};
    if (!where.kernel.empty()) args["kernel"] = where.kernel;
    events.push_back({{"ph", "X"},
                      {"pid", 1},
                      {"tid", track_of(where.device)},
                      {"name", n.op},
                      {"cat", phase_name(n.phase)},
                      {"ts", e.start_us},
                      {"dur", e.dur_us},
                      {"args", args}});
  }
  if (!executor.profile_copies().empty()) {
    const int copies = track_of(device + " streaming", device + " copy stream (streamed parameters)");
    for (const exec::CopyEvent& c : executor.profile_copies())
      events.push_back({{"ph", "X"},
                        {"pid", 1},
                        {"tid", copies},
                        {"name", (c.to_device ? "fetch " : "write home ") + c.value},
                        {"cat", "streaming"},
                        {"ts", c.start_us},
                        {"dur", c.dur_us},
                        {"args", {{"bytes", c.bytes}}}});
  }
  add_pipeline_spans(executor, events, track_of);
  const auto base = executor.profile_epoch();
  for (const Span& s : waits_)
    events.push_back({{"ph", "X"},
                      {"pid", 1},
                      {"tid", 2},
                      {"name", "wait for batch"},
                      {"cat", "data"},
                      {"ts", us_between(base, s.begin)},
                      {"dur", us_between(s.begin, s.end)}});
  if (!all_reduces_.empty())
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", 1},
                      {"tid", 3},
                      {"args", {{"name", "gradient all-reduce"}}}});
  for (const CommSpan& c : all_reduces_)
    events.push_back({{"ph", "X"},
                      {"pid", 1},
                      {"tid", 3},
                      {"name", "all-reduce"},
                      {"cat", "communication"},
                      {"ts", us_between(base, c.span.begin)},
                      {"dur", us_between(c.span.begin, c.span.end)},
                      {"args", {{"bytes", c.bytes}}}});
  const std::string text = json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
  return checkpoint::write_file_atomically(path, {text});
}

void ProfileRecorder::print_summary(std::ostream& out, const Graph& graph,
                                    const exec::Executor& executor) const {
  std::map<std::string, double> by_op;
  std::map<std::string, double> by_phase;
  const auto& times = executor.node_time_us();
  for (size_t i = 0; i < times.size(); ++i) {
    const Node& n = *graph.node_at(i);
    by_op[n.op] += times[i];
    by_phase[phase_name(n.phase)] += times[i];
  }
  double wait = 0;
  for (const Span& s : waits_) wait += us_between(s.begin, s.end);
  by_phase["data wait"] = wait;
  double total = 0;
  for (const auto& [_, t] : by_phase) total += t;
  std::vector<std::pair<std::string, double>> ops(by_op.begin(), by_op.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  char line[160];
  out << "time per op type (all steps):\n";
  for (const auto& [op, t] : ops) {
    std::snprintf(line, sizeof line, "  %-28s %10.1f ms  %5.1f%%\n", op.c_str(), t / 1000,
                  total > 0 ? 100 * t / total : 0);
    out << line;
  }
  out << "time per phase:\n";
  for (const char* p : {"forward", "backward", "optimizer", "data wait"}) {
    std::snprintf(line, sizeof line, "  %-28s %10.1f ms  %5.1f%%\n", p, by_phase[p] / 1000,
                  total > 0 ? 100 * by_phase[p] / total : 0);
    out << line;
  }
  if (executor.transfer_busy_us() > 0) {  // copies between the devices of a placed run
    std::snprintf(line, sizeof line, "copies between devices: %.1f ms, %.0f%% hidden behind compute\n",
                  executor.transfer_busy_us() / 1000, 100 * executor.hidden_transfer_fraction());
    out << line;
  }
  print_all_reduce(out);
}

void ProfileRecorder::print_all_reduce(std::ostream& out) const {
  if (all_reduces_.empty()) return;
  double total = 0, hidden = 0, bytes = 0;
  std::chrono::steady_clock::time_point last_step;
  size_t steps = 0;
  for (const CommSpan& c : all_reduces_) {
    total += us_between(c.span.begin, c.span.end);
    hidden += std::max(0.0, us_between(c.span.begin, std::min(c.span.end, c.backward_done)));
    bytes += static_cast<double>(c.bytes);
    if (steps == 0 || c.backward_done != last_step) ++steps;
    last_step = c.backward_done;
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "gradient all-reduce (%zu messages over %zu steps, %.2f MiB per step):\n"
                "  communication                %10.1f ms  %5.2f ms per step\n"
                "  hidden behind backward       %10.1f ms  %5.1f%%\n"
                "  exposed (after backward)     %10.1f ms  %5.1f%%\n",
                all_reduces_.size(), steps, bytes / steps / (1024.0 * 1024.0), total / 1000,
                total / 1000 / static_cast<double>(steps), hidden / 1000,
                total > 0 ? 100 * hidden / total : 0, (total - hidden) / 1000,
                total > 0 ? 100 * (total - hidden) / total : 0);
  out << line;
}

}  // namespace tandem::host::train
