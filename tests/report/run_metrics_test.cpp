// Reading a run directory back for `tandem report`: the series by step
// (a resumed run's repeated steps, epoch records filling in unlogged
// steps, null values), memory and placement records, and every way a run
// directory can be wrong, named with file:line.
#include "report/run_metrics.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "report/series.hpp"
#include "temp_dir.hpp"

namespace tandem::test {
namespace {

namespace report = host::report;

class RunMetricsTest : public ::testing::Test {
 protected:
  std::string run_with(const std::string& lines) {
    std::filesystem::create_directories(dir.file("run"));
    std::ofstream(dir.file("run/metrics.jsonl")) << lines;
    return dir.file("run");
  }
  static std::vector<std::pair<double, double>> points(const report::RunMetrics& run, const char* name) {
    std::vector<std::pair<double, double>> out;
    auto it = run.series.find(name);
    if (it != run.series.end())
      for (const report::Point& p : it->second) out.emplace_back(p.step, p.value);
    return out;
  }
  TempDir dir;
};

using Points = std::vector<std::pair<double, double>>;

TEST_F(RunMetricsTest, ReadsSeriesMemoryAndPlacement) {
  const std::string run = run_with(
      R"({"event":"step","step":2,"epoch":1,"loss":2.0,"accuracy":0.25,"lr":0.1,"samples_per_second":100,"data_wait_fraction":0.5}
{"event":"step","step":4,"epoch":1,"loss":1.5,"accuracy":0.5,"lr":0.1,"samples_per_second":110,"data_wait_fraction":0.25}
{"event":"epoch","epoch":1,"step":5,"train_loss":1.25,"train_accuracy":0.6,"samples_per_second":120,"data_wait_fraction":0.2,"seconds":1,"eval_loss":1.0,"eval_accuracy":0.7,"eval_perplexity":2.7}

{"event":"step","step":4,"epoch":1,"loss":1.4,"accuracy":0.5,"lr":0.1,"samples_per_second":110,"data_wait_fraction":null}
{"event":"memory","device":"reference:0","planned_bytes":1000,"training_peak_bytes":900,"peak_bytes":1200}
{"event":"memory","device":"onednn:0","planned_bytes":10,"training_peak_bytes":0,"peak_bytes":20}
{"event":"memory","device":"reference:0","planned_bytes":1000,"training_peak_bytes":950,"peak_bytes":1250}
{"event":"placement","mode":"pinned","devices":["onednn:0","reference:0"],"layers":[{"layer":"fc1","device":"reference:0"},{"layer":"fc2","device":"onednn:0"}],"copies":[{"value":"fc1.out","bytes":512,"from":"reference:0","to":"onednn:0","producer_layer":"fc1","consumer_layer":"fc2"}]}
{"event":"something_newer","step":"not drawn"}
)");
  auto r = report::read_run(run);
  ASSERT_TRUE(r) << r.error().message;
  namespace s = report::series;
  EXPECT_EQ(r->dir, run);
  // Step 4 twice (a resumed run): the later record; the epoch's step 5 fills in.
  EXPECT_EQ(points(*r, s::kTrainLoss), (Points{{2, 2.0}, {4, 1.4}, {5, 1.25}}));
  EXPECT_EQ(points(*r, s::kTrainAccuracy), (Points{{2, 0.25}, {4, 0.5}, {5, 0.6}}));
  EXPECT_EQ(points(*r, s::kLearningRate), (Points{{2, 0.1}, {4, 0.1}}));
  // null (a value JSON cannot hold) is left out, the earlier record's stays.
  EXPECT_EQ(points(*r, s::kDataWait), (Points{{2, 0.5}, {4, 0.25}, {5, 0.2}}));
  EXPECT_EQ(points(*r, s::kEvalLoss), (Points{{5, 1.0}}));
  EXPECT_EQ(points(*r, s::kEvalAccuracy), (Points{{5, 0.7}}));
  EXPECT_EQ(points(*r, s::kEvalPerplexity), (Points{{5, 2.7}}));
  EXPECT_TRUE(points(*r, s::kEvalBitsPerByte).empty());
  ASSERT_EQ(r->memory.size(), 2u);
  EXPECT_EQ(r->memory[0].device, "reference:0");
  EXPECT_EQ(r->memory[0].training_peak, 950u);
  EXPECT_EQ(r->memory[0].peak, 1250u);
  EXPECT_EQ(r->memory[1].device, "onednn:0");
  ASSERT_TRUE(r->placement);
  EXPECT_EQ(r->placement->mode, "pinned");
  ASSERT_EQ(r->placement->layers.size(), 2u);
  EXPECT_EQ(r->placement->layers[1], (std::pair<std::string, std::string>{"fc2", "onednn:0"}));
  ASSERT_EQ(r->placement->copies.size(), 1u);
  EXPECT_EQ(r->placement->copies[0].bytes, 512u);
  EXPECT_EQ(r->placement->copies[0].consumer_layer, "fc2");
}

TEST_F(RunMetricsTest, AnEmptyFileIsARunWithNothingYet) {
  auto r = report::read_run(run_with(""));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->series.empty());
  EXPECT_TRUE(r->memory.empty());
  EXPECT_FALSE(r->placement);
}

struct BadRun {
  const char* lines;
  int line;
  const char* says;
};

TEST_F(RunMetricsTest, AMalformedLineIsNamedWithFileAndLine) {
  const std::string good = R"({"event":"step","step":1,"loss":1})"
                           "\n";
  for (const BadRun& bad :
       {BadRun{"{\"event\":\"step\",\"step\":2,\"lo", 2, "not valid JSON"},
        BadRun{"[1,2]\n", 2, "a JSON object with an \"event\" field"},
        BadRun{"{\"step\":3}\n", 2, "a JSON object with an \"event\" field"},
        BadRun{"{\"event\":\"step\",\"loss\":1}\n", 2, "without its \"step\""},
        BadRun{"{\"event\":\"step\",\"step\":2,\"loss\":\"low\"}\n", 2, "\"loss\" is \"low\""},
        BadRun{"\n{\"event\":\"epoch\",\"step\":\"2\"}\n", 3, "\"step\" is \"2\""},
        BadRun{"{\"event\":\"placement\",\"layers\":7}\n", 2, "must be arrays"}}) {
    const std::string run = run_with(good + bad.lines);
    auto r = report::read_run(run);
    ASSERT_FALSE(r) << bad.lines;
    const std::string& message = r.error().message;
    EXPECT_NE(message.find(run + "/metrics.jsonl:" + std::to_string(bad.line) + ": "), std::string::npos)
        << message;
    EXPECT_NE(message.find(bad.says), std::string::npos) << message;
    EXPECT_NE(message.find("delete or repair that line"), std::string::npos) << message;
  }
}

TEST_F(RunMetricsTest, AMissingRunDirectoryOrMetricsFileIsNamed) {
  auto missing = report::read_run(dir.file("nowhere"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find(dir.file("nowhere") + ": no such directory"), std::string::npos)
      << missing.error().message;
  std::filesystem::create_directories(dir.file("empty"));
  auto empty = report::read_run(dir.file("empty"));
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("holds no metrics.jsonl"), std::string::npos) << empty.error().message;
  std::ofstream(dir.file("plain")) << "x";
  auto file = report::read_run(dir.file("plain"));
  ASSERT_FALSE(file);
  EXPECT_NE(file.error().message.find("not a directory"), std::string::npos) << file.error().message;
}

}  // namespace
}  // namespace tandem::test
