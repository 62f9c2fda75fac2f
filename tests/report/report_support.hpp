// What the end-to-end tests of `tandem report` and `tandem train
// --tensorboard` share: training the tiny synthetic model of
// tests/train/cli_support.hpp into a run directory, the charts of a page,
// and the scalars metrics.jsonl says TensorBoard should hold.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_support.hpp"

namespace tandem::test {

// The ids of the charts every report draws (a language model adds two).
inline const char* const kChartIds[] = {"loss", "accuracy", "lr", "samples-per-second", "data-wait"};

class ReportTest : public CliTest {
 protected:
  // Trains kSynthetic (64 steps, a record every 4) into `run` on the
  // reference backend; `extra`: more options.
  std::string train(const std::string& run, const std::string& extra = "") {
    const std::string m = model(kSynthetic);
    CliRun r = tandem("train " + m + " --device reference --set train.log_every=4 --run-dir " +
                      dir.file(run) + " " + extra);
    EXPECT_EQ(r.code, 0) << r.output;
    return dir.file(run);
  }
};

// The <svg> of chart `id` in a page (empty: none).
inline std::string chart_svg(const std::string& html, const std::string& id) {
  const size_t at = html.find("<svg class=\"chart\" id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t end = html.find("</svg>", at);
  return end == std::string::npos ? "" : html.substr(at, end + 6 - at);
}

// The newest event file in `dir` (empty: none).
inline std::string event_file(const std::string& dir) {
  std::string found;
  if (!std::filesystem::is_directory(dir)) return found;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0 &&
        entry.path().string() > found)
      found = entry.path().string();
  return found;
}

// tag -> step -> value, as `tandem train --tensorboard` should have written
// them, from metrics.jsonl: every step record's training figures; each
// epoch record's evaluation, and its training figures where no step
// record has that step.
using Scalars = std::map<std::string, std::map<int64_t, double>>;
inline Scalars scalars_in_metrics(const std::string& run_dir) {
  Scalars out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<nlohmann::json> epochs;
  const std::pair<const char*, const char*> step_fields[] = {{"loss", "train/loss"},
                                                             {"accuracy", "train/accuracy"},
                                                             {"lr", "lr"},
                                                             {"samples_per_second", "samples_per_second"},
                                                             {"data_wait_fraction", "data_wait"}};
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "epoch") epochs.push_back(j);
    if (j["event"] != "step") continue;
    for (const auto& [key, tag] : step_fields) out[tag][j["step"].get<int64_t>()] = j[key].get<double>();
  }
  const std::pair<const char*, const char*> epoch_fields[] = {{"train_loss", "train/loss"},
                                                              {"train_accuracy", "train/accuracy"},
                                                              {"samples_per_second", "samples_per_second"},
                                                              {"data_wait_fraction", "data_wait"},
                                                              {"eval_loss", "eval/loss"},
                                                              {"eval_accuracy", "eval/accuracy"}};
  for (const nlohmann::json& j : epochs) {
    const int64_t step = j["step"].get<int64_t>();
    const bool logged = out["train/loss"].count(step) > 0;
    for (const auto& [key, tag] : epoch_fields)
      if (j.contains(key) && (std::string(tag).rfind("eval/", 0) == 0 || !logged))
        out[tag][step] = j[key].get<double>();
  }
  return out;
}

}  // namespace tandem::test
