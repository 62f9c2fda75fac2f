// The event file of `tandem train --tensorboard`, read by TensorBoard's own
// EventAccumulator (the `tensorboard` package from PyPI, in a venv made
// once under the build directory): its scalar tags and values are those of
// metrics.jsonl. Without python3 or a way to install the package, the test
// is skipped with the reason.
#include <gtest/gtest.h>

#include <fstream>

#include "report_support.hpp"

#ifndef TANDEM_PYTHON3
#error "TANDEM_PYTHON3 must be defined by tests/report/CMakeLists.txt"
#endif

namespace tandem::test {
namespace {

std::string last_lines(const std::string& text) {
  return text.size() > 600 ? "..." + text.substr(text.size() - 600) : text;
}

// The venv's python with `tensorboard` importable, or empty with `why`.
std::string tensorboard_python(std::string& why) {
  const std::string venv = TANDEM_TENSORBOARD_VENV, python = venv + "/bin/python";
  const std::string can_import = "'" + python + "' -c 'import tensorboard' >/dev/null 2>&1";
  if (shell(can_import).code == 0) return python;
  if (std::string(TANDEM_PYTHON3).empty()) {
    why = "no python3 was found when the build was configured";
    return "";
  }
  CliRun made = shell("rm -rf '" + venv + "' && '" TANDEM_PYTHON3 "' -m venv '" + venv + "'");
  if (made.code != 0) {
    why = TANDEM_PYTHON3 " -m venv " + venv +
          " failed (Debian: apt-get install python3-venv): " + last_lines(made.output);
    return "";
  }
  CliRun pip = shell("'" + venv + "/bin/pip' install --disable-pip-version-check --no-input --retries 1 " +
                     "--timeout 30 --quiet tensorboard");
  if (pip.code != 0 || shell(can_import).code != 0) {
    why = "pip could not install the tensorboard package into " + venv +
          " (no access to PyPI?): " + last_lines(pip.output);
    shell("rm -rf '" + venv + "'");  // the next run tries again
    return "";
  }
  return python;
}

// Every scalar the accumulator finds in `dir`, as JSON {tag: [[step, value], ...]}.
constexpr const char* kReadScalars = R"(import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
acc.Reload()
scalars = {tag: [[e.step, e.value] for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
with open(sys.argv[2], "w") as out:
    json.dump(scalars, out)
)";

using TensorBoardPackage = ReportTest;

TEST_F(TensorBoardPackage, EventAccumulatorReadsTheScalarsOfMetricsJsonl) {
  std::string why;
  const std::string python = tensorboard_python(why);
  if (python.empty()) GTEST_SKIP() << why;
  const std::string run = train("run", "--tensorboard " + dir.file("tb"));
  std::ofstream(dir.file("read_scalars.py")) << kReadScalars;
  CliRun read = shell("'" + python + "' " + dir.file("read_scalars.py") + " " + dir.file("tb") + " " +
                      dir.file("scalars.json"));
  ASSERT_EQ(read.code, 0) << read.output;
  const auto found = nlohmann::json::parse(read_file(dir.file("scalars.json")));
  const Scalars expected = scalars_in_metrics(run);
  std::vector<std::string> tags;
  for (const auto& [tag, values] : found.items()) tags.push_back(tag);
  std::vector<std::string> expected_tags;
  for (const auto& [tag, values] : expected) expected_tags.push_back(tag);
  std::sort(tags.begin(), tags.end());
  ASSERT_EQ(tags, expected_tags);
  EXPECT_EQ(expected_tags, (std::vector<std::string>{"data_wait", "eval/accuracy", "eval/loss", "lr",
                                                     "samples_per_second", "train/accuracy", "train/loss"}));
  for (const auto& [tag, values] : expected) {
    const nlohmann::json& events = found[tag];
    ASSERT_EQ(events.size(), values.size()) << tag;
    for (const nlohmann::json& e : events) {
      const int64_t step = e[0].get<int64_t>();
      ASSERT_EQ(values.count(step), 1u) << tag << " at step " << step << " is not in metrics.jsonl";
      const double value = values.at(step);
      EXPECT_NEAR(e[1].get<double>(), value, 1e-6 * std::max(1.0, std::abs(value))) << tag << " at " << step;
    }
  }
}

}  // namespace
}  // namespace tandem::test
