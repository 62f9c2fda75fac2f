#include "report/html_report.hpp"

#include <cstdio>
#include <sstream>

#include "report/series.hpp"
#include "report/svg_chart.hpp"
#include "util/format.hpp"

namespace tandem::host::report {
namespace {

constexpr const char* kStyle = R"(body{font-family:sans-serif;margin:24px;color:#222;max-width:1560px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px}
.charts{display:flex;flex-wrap:wrap;gap:16px}.chart-box{border:1px solid #ddd;padding:8px;margin:0}
.legend{font-size:13px;margin:4px 0 0 0;padding:0;list-style:none}
.legend li{display:inline-block;margin-right:18px}
.swatch{display:inline-block;width:28px;height:0;border-top:3px solid;vertical-align:middle;margin-right:6px}
.swatch.eval{border-top-style:dashed}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}td.n{text-align:right}
.no-data{color:#666})";

std::string fixed(double v, int digits) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

const std::vector<Point>* find(const RunMetrics& run, const char* name) {
  auto it = run.series.find(name);
  return it == run.series.end() || it->second.empty() ? nullptr : &it->second;
}

// One chart's lines: for each run, its training and/or evaluation series.
Chart chart(const std::vector<RunMetrics>& runs, Chart c, const char* train, const char* eval) {
  for (int r = 0; r < static_cast<int>(runs.size()); ++r)
    for (const char* name : {train, eval})
      if (name != nullptr)
        if (const std::vector<Point>* points = find(runs[r], name))
          c.lines.push_back({r, runs[r].dir + " " + name, name == eval, *points});
  return c;
}

bool any_run_has(const std::vector<RunMetrics>& runs, const char* name) {
  for (const RunMetrics& run : runs)
    if (find(run, name) != nullptr) return true;
  return false;
}

std::vector<Chart> charts(const std::vector<RunMetrics>& runs) {
  namespace s = series;
  const std::string none = "no data: no run recorded ";
  std::vector<Chart> out;
  out.push_back(chart(runs, {"loss", "Loss", "loss", 1, none + "a loss", {}}, s::kTrainLoss, s::kEvalLoss));
  out.push_back(chart(runs, {"accuracy", "Accuracy", "accuracy (%)", 100, none + "an accuracy", {}},
                      s::kTrainAccuracy, s::kEvalAccuracy));
  // A language model's: only when some run is one.
  if (any_run_has(runs, s::kEvalPerplexity))
    out.push_back(chart(runs, {"perplexity", "Evaluation perplexity", "perplexity", 1, none, {}}, nullptr,
                        s::kEvalPerplexity));
  if (any_run_has(runs, s::kEvalBitsPerByte))
    out.push_back(chart(runs, {"bits-per-byte", "Evaluation bits per byte", "bits per byte", 1, none, {}},
                        nullptr, s::kEvalBitsPerByte));
  out.push_back(chart(runs, {"lr", "Learning rate", "learning rate", 1, none + "a learning rate", {}},
                      s::kLearningRate, nullptr));
  out.push_back(chart(runs, {"samples-per-second", "Throughput", "samples/s", 1, none + "a throughput", {}},
                      s::kSamplesPerSecond, nullptr));
  out.push_back(chart(
      runs,
      {"data-wait", "Data wait", "waiting for data (% of step time)", 100, none + "a data-wait share", {}},
      s::kDataWait, nullptr));
  return out;
}

std::string legend(const std::vector<RunMetrics>& runs) {
  std::ostringstream html;
  html << "<ul class=\"legend\">";
  for (int r = 0; r < static_cast<int>(runs.size()); ++r)
    html << "<li><span class=\"swatch\" style=\"border-color:" << run_colour(r) << "\"></span>"
         << escape_html(runs[r].dir) << "</li>";
  html << "<li><span class=\"swatch\" style=\"border-color:#555\"></span>training</li>"
       << "<li><span class=\"swatch eval\" style=\"border-color:#555\"></span>evaluation</li></ul>\n";
  return html.str();
}

std::string last(const RunMetrics& run, const char* name, double scale, int digits) {
  const std::vector<Point>* points = find(run, name);
  return points == nullptr ? "-" : fixed(points->back().value * scale, digits);
}

std::string summary_table(const std::vector<RunMetrics>& runs) {
  std::ostringstream html;
  html << "<table class=\"runs\"><tr><th>run</th><th>last step</th><th>train loss</th><th>train accuracy "
          "(%)</th><th>eval loss</th><th>eval accuracy (%)</th></tr>\n";
  for (const RunMetrics& run : runs) {
    const std::vector<Point>* loss = find(run, series::kTrainLoss);
    html << "<tr><td>" << escape_html(run.dir) << "</td><td class=\"n\">"
         << (loss ? fixed(loss->back().step, 0) : "-") << "</td><td class=\"n\">"
         << last(run, series::kTrainLoss, 1, 4) << "</td><td class=\"n\">"
         << last(run, series::kTrainAccuracy, 100, 2) << "</td><td class=\"n\">"
         << last(run, series::kEvalLoss, 1, 4) << "</td><td class=\"n\">"
         << last(run, series::kEvalAccuracy, 100, 2) << "</td></tr>\n";
  }
  html << "</table>\n";
  return html.str();
}

std::string versus_plan(uint64_t measured, uint64_t planned) {
  if (measured == 0 || planned == 0) return "-";
  const double share =
      100.0 * (static_cast<double>(measured) - static_cast<double>(planned)) / static_cast<double>(planned);
  return (share >= 0 ? "+" : "") + fixed(share, 1) + "%";
}

std::string memory_table(const std::vector<RunMetrics>& runs) {
  std::ostringstream html;
  html << "<h2>Memory per device</h2>\n";
  bool any = false;
  for (const RunMetrics& run : runs) any = any || !run.memory.empty();
  if (!any)
    return html.str() +
           "<p class=\"no-data\">no data: no run recorded its memory (a run records it when "
           "training ends)</p>\n";
  html << "<table class=\"memory\"><tr><th>run</th><th>device</th><th>planned</th><th>measured peak "
          "(training steps)</th><th>vs plan</th><th>measured peak (with evaluation)</th></tr>\n";
  for (int r = 0; r < static_cast<int>(runs.size()); ++r)
    for (const DeviceMemory& m : runs[r].memory)
      html << "<tr><td><span class=\"swatch\" style=\"border-color:" << run_colour(r) << "\"></span>"
           << escape_html(runs[r].dir) << "</td><td>" << escape_html(m.device) << "</td><td class=\"n\">"
           << human_bytes(m.planned) << "</td><td class=\"n\">"
           << (m.training_peak > 0 ? human_bytes(m.training_peak) : "-") << "</td><td class=\"n\">"
           << versus_plan(m.training_peak, m.planned) << "</td><td class=\"n\">" << human_bytes(m.peak)
           << "</td></tr>\n";
  html << "</table>\n";
  return html.str();
}

std::string placement_tables(const RunMetrics& run, int r) {
  const RunPlacement& p = *run.placement;
  uint64_t bytes = 0;
  for (const PlacedCopy& c : p.copies) bytes += c.bytes;
  std::ostringstream html;
  html << "<h3><span class=\"swatch\" style=\"border-color:" << run_colour(r) << "\"></span>"
       << escape_html(run.dir) << ": placement " << escape_html(p.mode) << ", " << p.copies.size()
       << " copies between devices per step (" << human_bytes(bytes) << ")</h3>\n"
       << "<table class=\"placement\"><tr><th>layer</th><th>device</th></tr>\n";
  for (const auto& [layer, device] : p.layers)
    html << "<tr><td>" << escape_html(layer) << "</td><td>" << escape_html(device) << "</td></tr>\n";
  html << "</table>\n";
  if (p.copies.empty()) return html.str();
  html << "<table class=\"copies\"><tr><th>tensor</th><th>bytes</th><th>from</th><th>to</th><th>between "
          "layers</th></tr>\n";
  for (const PlacedCopy& c : p.copies)
    html << "<tr><td>" << escape_html(c.value) << "</td><td class=\"n\">" << human_bytes(c.bytes)
         << "</td><td>" << escape_html(c.from) << "</td><td>" << escape_html(c.to) << "</td><td>"
         << escape_html(c.producer_layer) << " &rarr; " << escape_html(c.consumer_layer) << "</td></tr>\n";
  html << "</table>\n";
  return html.str();
}

std::string placement_section(const std::vector<RunMetrics>& runs) {
  std::string html = "<h2>Placement</h2>\n";
  bool any = false;
  for (int r = 0; r < static_cast<int>(runs.size()); ++r)
    if (runs[r].placement) {
      html += placement_tables(runs[r], r);
      any = true;
    }
  if (!any) html += "<p class=\"no-data\">Every run trained on one device: no placement to show.</p>\n";
  return html;
}

}  // namespace

std::string render_report(const std::vector<RunMetrics>& runs) {
  std::ostringstream html;
  std::string names;
  for (const RunMetrics& run : runs) names += (names.empty() ? "" : ", ") + run.dir;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>tandem report: "
       << escape_html(names) << "</title>\n<style>\n"
       << kStyle << "\n</style>\n</head>\n<body>\n<h1>tandem report</h1>\n"
       << legend(runs) << summary_table(runs) << "<h2>Over steps</h2>\n<div class=\"charts\">\n";
  for (const Chart& c : charts(runs))
    html << "<figure class=\"chart-box\">\n" << render_chart(c) << legend(runs) << "</figure>\n";
  html << "</div>\n" << memory_table(runs) << placement_section(runs) << "</body>\n</html>\n";
  return html.str();
}

}  // namespace tandem::host::report
