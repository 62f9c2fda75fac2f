// The charts and the page of `tandem report`, without running anything:
// ticks, labels, escaping, a chart without data, the runs' colours and
// legend, the memory and placement tables.
#include <gtest/gtest.h>

#include <regex>

#include "report/html_report.hpp"
#include "report/series.hpp"
#include "report/svg_chart.hpp"

namespace tandem::test {
namespace {

namespace report = host::report;

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing '" << (part) << "' in:\n" << (text)

TEST(NiceTicks, RoundStepsCoveringTheRange) {
  EXPECT_EQ(report::nice_ticks(0, 1, 6, false),
            (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  const auto steps = report::nice_ticks(1, 64, 6, true);
  EXPECT_EQ(steps.front(), 0);
  EXPECT_EQ(steps.back(), 70);
  EXPECT_EQ(steps[1] - steps[0], 10);
  const auto lr = report::nice_ticks(0.0493, 0.0507, 6, false);
  EXPECT_LE(lr.front(), 0.0493);
  EXPECT_GE(lr.back(), 0.0507);
  EXPECT_EQ(report::nice_ticks(3, 4, 6, true), (std::vector<double>{3, 4}));  // integers: no step below 1
}

TEST(TickLabel, AsManyDecimalsAsTheStepNeeds) {
  EXPECT_EQ(report::tick_label(0.6000000000000001, 0.2), "0.6");
  EXPECT_EQ(report::tick_label(0.05, 0.01), "0.05");
  EXPECT_EQ(report::tick_label(1500, 500), "1500");
  EXPECT_EQ(report::tick_label(-1e-17, 0.1), "0.0");
  EXPECT_EQ(report::tick_label(2e-5, 1e-5), "2e-05");
}

TEST(EscapeHtml, EscapesMarkupAndQuotes) {
  EXPECT_EQ(report::escape_html("runs/<a&b>\"'"), "runs/&lt;a&amp;b&gt;&quot;&#39;");
}

TEST(RenderChart, LinesPerRunWithAxes) {
  report::Chart c{"loss", "Loss", "loss", 1, "no data", {}};
  c.lines.push_back({0, "a train", false, {{1, 2.0}, {2, 1.5}, {3, 1.0}}});
  c.lines.push_back({1, "b eval", true, {{3, 1.2}}});
  const std::string svg = report::render_chart(c);
  EXPECT_EQ(svg.rfind("<svg class=\"chart\" id=\"loss\"", 0), 0u) << svg;
  EXPECT_HAS(svg, "<polyline class=\"line\" points=\"");
  EXPECT_HAS(svg, "stroke=\"" + report::run_colour(0) + "\"");
  EXPECT_HAS(svg, "fill=\"" + report::run_colour(1) + "\"");  // one evaluation point: a marker
  EXPECT_HAS(svg, ">step</text>");
  EXPECT_HAS(svg, "rotate(-90)\" text-anchor=\"middle\">loss</text>");
  EXPECT_EQ(svg.find("no data"), std::string::npos);
  EXPECT_NE(report::run_colour(0), report::run_colour(1));
}

TEST(RenderChart, WithoutDataSaysSo) {
  const std::string svg = report::render_chart({"lr", "Learning rate", "lr", 1, "no data: nothing yet", {}});
  EXPECT_HAS(svg, "<text class=\"no-data\"");
  EXPECT_HAS(svg, "no data: nothing yet");
  EXPECT_EQ(svg.find("<polyline"), std::string::npos);
}

TEST(RenderChart, ThinsLongSeriesKeepingTheLastPoint) {
  report::Chart c{"loss", "Loss", "loss", 1, "", {}};
  report::ChartLine l{0, "a", false, {}};
  for (int i = 1; i <= 100000; ++i) l.points.push_back({double(i), 1.0 / i});
  c.lines.push_back(l);
  const std::string svg = report::render_chart(c);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("points=\"([^\"]*)\"")));
  const std::string points = m[1];
  EXPECT_LT(std::count(points.begin(), points.end(), ' '), 2000);
  EXPECT_LT(svg.size(), size_t(100000));
}

report::RunMetrics run(const std::string& dir, double loss) {
  report::RunMetrics r;
  r.dir = dir;
  r.series[report::series::kTrainLoss] = {{1, loss}, {2, loss / 2}};
  r.series[report::series::kEvalAccuracy] = {{2, 0.5}};
  r.memory.push_back({"reference:0", 2048, 1024, 4096});
  return r;
}

TEST(RenderReport, OverlaysRunsWithLegendAndTables) {
  report::RunMetrics b = run("runs/<b>", 2);
  b.placement = report::RunPlacement{"pinned",
                                     {{"fc1", "reference:0"}, {"fc2", "onednn:0"}},
                                     {{"fc1.out", "reference:0", "onednn:0", "fc1", "fc2", 256}}};
  const std::string html = report::render_report({run("runs/a", 1), b});
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_HAS(html, "<li><span class=\"swatch\" style=\"border-color:" + report::run_colour(0) +
                       "\"></span>runs/a</li>");
  EXPECT_HAS(html, "runs/&lt;b&gt;");
  EXPECT_EQ(html.find("runs/<b>"), std::string::npos);
  EXPECT_HAS(html, "<table class=\"memory\">");
  EXPECT_HAS(html, "<td class=\"n\">2.0 KiB</td>");
  EXPECT_HAS(html, "-50.0%");  // the training peak against the plan
  EXPECT_HAS(html, "<table class=\"placement\">");
  EXPECT_HAS(html, "<td>fc2</td><td>onednn:0</td>");
  EXPECT_HAS(html, "<table class=\"copies\">");
  for (const char* id : {"loss", "accuracy", "lr", "samples-per-second", "data-wait"})
    EXPECT_HAS(html, std::string("<svg class=\"chart\" id=\"") + id + "\"");
  EXPECT_EQ(html.find("id=\"perplexity\""), std::string::npos);  // no language model here
  EXPECT_HAS(html, "no data: no run recorded a learning rate");
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

TEST(RenderReport, ALanguageModelAddsPerplexityAndBitsPerByte) {
  report::RunMetrics lm = run("runs/lm", 3);
  lm.series[report::series::kEvalPerplexity] = {{2, 5.0}};
  lm.series[report::series::kEvalBitsPerByte] = {{2, 2.3}};
  const std::string html = report::render_report({run("runs/a", 1), lm});
  EXPECT_HAS(html, "<svg class=\"chart\" id=\"perplexity\"");
  EXPECT_HAS(html, "<svg class=\"chart\" id=\"bits-per-byte\"");
}

}  // namespace
}  // namespace tandem::test
