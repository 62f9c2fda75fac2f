// The report of each example under examples/ as a browser shows it: each
// trains a few steps on its real data (a record every 2 steps and the
// evaluation at the end), `tandem report` writes its page, and headless
// Chromium's DOM of that page must hold every chart the example calls for
// with its data drawn: a training line of several points, the evaluation's
// markers, and for the language model its perplexity and bits per byte.
// An example whose data set is not installed (scripts/install-deps.sh
// installs them) or a machine without Chromium skips with the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "browser_support.hpp"
#include "png_pixels.hpp"
#include "report_support.hpp"

namespace tandem::test {
namespace {

struct Example {
  const char* name;
  const char* data;  // a file the example reads, to skip when it is absent
  bool language_model;
};

const Example kExamples[] = {
    {"fmnist_mlp", "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", false},
    {"fmnist_cnn", "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", false},
    {"embedding_cpu", nullptr, false},
    {"gpt_fortunes", "/usr/share/games/fortunes/cookie", true},
};

// Names the case in ctest's list by its example.
void PrintTo(const Example& example, std::ostream* out) {
  *out << example.name;
}

class ExampleReport : public ReportTest, public ::testing::WithParamInterface<Example> {};

// The evaluation markers (one <circle> per evaluation) of run 0 in a chart.
size_t eval_markers(const std::string& svg) {
  const size_t at = svg.find("<g class=\"series eval\" data-run=\"0\">");
  if (at == std::string::npos) return 0;
  const std::string group = svg.substr(at, svg.find("</g>", at) - at);
  size_t n = 0;
  for (size_t p = group.find("<circle"); p != std::string::npos; p = group.find("<circle", p + 1)) ++n;
  return n;
}

TEST_P(ExampleReport, ChromiumShowsEveryChartWithData) {
  const Example& example = GetParam();
  if (example.data != nullptr && !std::filesystem::exists(example.data))
    GTEST_SKIP() << example.name << " reads " << example.data
                 << ", which is not installed (scripts/install-deps.sh installs it)";
  std::string why;
  const std::string chromium = find_chromium(why);
  if (chromium.empty()) GTEST_SKIP() << why;

  const std::string run = dir.file(example.name);
  const std::string toml = std::string(TANDEM_SOURCE_DIR) + "/examples/" + example.name + ".toml";
  CliRun trained = tandem("train " + toml + " --set train.steps=8 --set train.log_every=2 --run-dir " + run);
  ASSERT_EQ(trained.code, 0) << trained.output;
  CliRun report = tandem("report " + run);
  ASSERT_EQ(report.code, 0) << report.output;

  const std::string page = "file://" + run + "/report.html";
  const std::string browse = headless(chromium, dir.file("profile"));
  CliRun dom = shell(browse + "--dump-dom " + page + " 2>/dev/null");
  ASSERT_EQ(dom.code, 0) << "chromium --dump-dom failed:\n" << dom.output;
  for (const char* id : kChartIds) {
    const std::string svg = chart_svg(dom.output, id);
    ASSERT_FALSE(svg.empty()) << "chart '" << id << "' is not in the DOM Chromium built";
    EXPECT_EQ(svg.find("no-data"), std::string::npos) << id << ":\n" << svg;
    // 8 steps, a record every 2: 4 points (thinning keeps them all).
    EXPECT_EQ(point_count(line_points(svg, 0)), 4) << id << ":\n" << svg;
  }
  for (const char* id : {"loss", "accuracy"})
    EXPECT_EQ(eval_markers(chart_svg(dom.output, id)), 1u) << id << ": the evaluation at the end";
  const std::vector<const char*> lm_charts = {"perplexity", "bits-per-byte"};
  for (const char* id : lm_charts) {
    const std::string svg = chart_svg(dom.output, id);
    if (!example.language_model) {
      EXPECT_TRUE(svg.empty()) << id << " is drawn for a classifier";
      continue;
    }
    ASSERT_FALSE(svg.empty()) << "chart '" << id << "' is not in the DOM of a language model's report";
    EXPECT_EQ(eval_markers(svg), 1u) << id << ":\n" << svg;
  }

  CliRun shot =
      shell(browse + "--window-size=1600,1400 --screenshot=" + dir.file("shot.png") + " " + page + " 2>&1");
  ASSERT_EQ(shot.code, 0) << "chromium --screenshot failed:\n" << shot.output;
  const Pixels pixels = read_png(read_file(dir.file("shot.png")));
  ASSERT_TRUE(pixels.error.empty()) << dir.file("shot.png") << ": " << pixels.error;
  // run_colour(0) of host/report/svg_chart.cpp: the legend's swatch and the
  // lines and markers in view paint well over a thousand pixels.
  EXPECT_GT(std::count(pixels.rgb.begin(), pixels.rgb.end(), 0x1f77b4u), 1000)
      << "the run's colour is hardly painted";
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleReport, ::testing::ValuesIn(kExamples),
                         [](const ::testing::TestParamInfo<Example>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace tandem::test
