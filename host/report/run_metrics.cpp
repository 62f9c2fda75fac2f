#include "report/run_metrics.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "report/series.hpp"

namespace tandem::host::report {
namespace {

using nlohmann::json;

// Which field of which record feeds which series.
struct Field {
  const char* key;
  const char* series;
};
constexpr Field kStepFields[] = {{"loss", series::kTrainLoss},
                                 {"accuracy", series::kTrainAccuracy},
                                 {"lr", series::kLearningRate},
                                 {"samples_per_second", series::kSamplesPerSecond},
                                 {"data_wait_fraction", series::kDataWait}};
// An epoch record repeats its last step's training figures: they fill in
// a step that log_every left unlogged, without replacing a step record.
constexpr Field kEpochTrainFields[] = {{"train_loss", series::kTrainLoss},
                                       {"train_accuracy", series::kTrainAccuracy},
                                       {"samples_per_second", series::kSamplesPerSecond},
                                       {"data_wait_fraction", series::kDataWait}};
constexpr Field kEpochEvalFields[] = {{"eval_loss", series::kEvalLoss},
                                      {"eval_accuracy", series::kEvalAccuracy},
                                      {"eval_perplexity", series::kEvalPerplexity},
                                      {"eval_bits_per_byte", series::kEvalBitsPerByte}};

using SeriesByStep = std::map<std::string, std::map<double, double>>;

// What reading one line found wrong: the caller adds file:line.
struct LineError {
  std::string what;
};

std::optional<LineError> number(const json& record, const char* key, std::optional<double>& out) {
  out.reset();
  auto it = record.find(key);
  if (it == record.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return LineError{"\"" + std::string(key) + "\" is " + it->dump() + ", not a number"};
  out = it->get<double>();
  return std::nullopt;
}

template <size_t N>
std::optional<LineError> take(const json& record, double step, const Field (&fields)[N], SeriesByStep& into) {
  for (const Field& f : fields) {
    std::optional<double> v;
    if (auto e = number(record, f.key, v)) return e;
    if (v) into[f.series][step] = *v;
  }
  return std::nullopt;
}

std::string text(const json& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
}

uint64_t count(const json& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

void take_memory(const json& record, std::vector<DeviceMemory>& memory) {
  DeviceMemory m{text(record, "device"), count(record, "planned_bytes"), count(record, "training_peak_bytes"),
                 count(record, "peak_bytes")};
  for (DeviceMemory& known : memory)
    if (known.device == m.device) {
      known = m;
      return;
    }
  memory.push_back(m);
}

std::optional<LineError> take_placement(const json& record, std::optional<RunPlacement>& placement) {
  RunPlacement p;
  p.mode = text(record, "mode");
  const json layers = record.value("layers", json::array());
  const json copies = record.value("copies", json::array());
  if (!layers.is_array() || !copies.is_array())
    return LineError{"a placement record's \"layers\" and \"copies\" must be arrays"};
  for (const json& l : layers)
    if (l.is_object()) p.layers.emplace_back(text(l, "layer"), text(l, "device"));
  for (const json& c : copies)
    if (c.is_object())
      p.copies.push_back({text(c, "value"), text(c, "from"), text(c, "to"), text(c, "producer_layer"),
                          text(c, "consumer_layer"), count(c, "bytes")});
  placement = std::move(p);
  return std::nullopt;
}

// One line's record into `run` (the training series first into `steps`
// and `epochs`, merged at the end).
std::optional<LineError> take_line(const std::string& line, RunMetrics& run, SeriesByStep& steps,
                                   SeriesByStep& epochs) {
  json record;
  try {
    record = json::parse(line);
  } catch (const json::parse_error& e) {
    return LineError{"not valid JSON (at column " + std::to_string(e.byte) + ")"};
  }
  if (!record.is_object() || !record.contains("event") || !record["event"].is_string())
    return LineError{"not a record: each line is a JSON object with an \"event\" field"};
  const std::string event = record["event"].get<std::string>();
  if (event == "memory") {
    take_memory(record, run.memory);
    return std::nullopt;
  }
  if (event == "placement") return take_placement(record, run.placement);
  if (event != "step" && event != "epoch") return std::nullopt;  // a newer kind of record: not drawn
  std::optional<double> step;
  if (auto e = number(record, "step", step)) return e;
  if (!step) return LineError{"a \"" + event + "\" record without its \"step\""};
  if (event == "step") return take(record, *step, kStepFields, steps);
  if (auto e = take(record, *step, kEpochTrainFields, epochs)) return e;
  return take(record, *step, kEpochEvalFields, steps);
}

}  // namespace

Result<RunMetrics> read_run(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const char* what_to_give =
      "give the run directory of a `tandem train` run (its --run-dir; runs/<model name> "
      "by default)";
  if (!fs::exists(dir, ec)) return make_error(dir + ": no such directory; " + what_to_give, TDM_NOT_FOUND);
  if (!fs::is_directory(dir, ec))
    return make_error(dir + ": not a directory; " + what_to_give, TDM_INVALID_ARGUMENT);
  const std::string file = (fs::path(dir) / "metrics.jsonl").string();
  if (!fs::exists(file, ec))
    return make_error(dir + " holds no metrics.jsonl, which every `tandem train` run writes: " + what_to_give,
                      TDM_NOT_FOUND);
  errno = 0;
  std::ifstream in(file);
  if (!in) return make_error(file + ": cannot be read (" + std::strerror(errno) + ")", TDM_INVALID_ARGUMENT);
  RunMetrics run;
  run.dir = dir;
  SeriesByStep steps, epochs;
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (auto e = take_line(line, run, steps, epochs))
      return make_error(file + ":" + std::to_string(number) + ": " + e->what +
                            "; a crash can cut the last line short: delete or repair that line, then run "
                            "tandem report again",
                        TDM_INVALID_ARGUMENT);
  }
  if (in.bad())
    return make_error(file + ": a read failed (" + std::strerror(errno) + ")", TDM_INVALID_ARGUMENT);
  for (const auto& [name, values] : epochs)
    for (const auto& [step, value] : values) steps[name].emplace(step, value);
  for (const auto& [name, values] : steps)
    for (const auto& [step, value] : values) run.series[name].push_back({step, value});
  return run;
}

}  // namespace tandem::host::report
