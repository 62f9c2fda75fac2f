// The report of two trained runs as a browser shows it: headless Chromium
// (Debian's `chromium`, installed by the test when it runs as root and
// apt-get can) loads the page from the file, without network. Its DOM
// must hold every chart as an <svg> with a line of points for each run,
// and its screenshot must show both runs' colours painted. Without a
// Chromium the test is skipped with the reason.
#include <gtest/gtest.h>

#include "browser_support.hpp"
#include "png_pixels.hpp"
#include "report_support.hpp"

namespace tandem::test {
namespace {

// Pixels of exactly `rgb` (the middle of a line is painted in its colour).
size_t count(const Pixels& p, uint32_t rgb) {
  return static_cast<size_t>(std::count(p.rgb.begin(), p.rgb.end(), rgb));
}

using Browser = ReportTest;

TEST_F(Browser, ChromiumRendersEveryChartWithData) {
  std::string why;
  const std::string chromium = find_chromium(why);
  if (chromium.empty()) GTEST_SKIP() << why;
  const std::string a = train("a"), b = train("b", "--set train.lr=0.02");
  ASSERT_EQ(tandem("report " + a + " " + b).code, 0);
  const std::string page = "file://" + a + "/report.html";
  const std::string browse = headless(chromium, dir.file("profile"));
  CliRun dom = shell(browse + "--dump-dom " + page + " 2>/dev/null");
  ASSERT_EQ(dom.code, 0) << "chromium --dump-dom failed:\n" << dom.output;
  for (const char* id : kChartIds) {
    const std::string svg = chart_svg(dom.output, id);
    ASSERT_FALSE(svg.empty()) << "chart '" << id << "' is not in the DOM Chromium built:\n" << dom.output;
    EXPECT_EQ(svg.find("no-data"), std::string::npos) << id;
    for (int run : {0, 1}) {
      const std::string points = line_points(svg, run);
      ASSERT_FALSE(points.empty()) << "chart '" << id << "' has no line of run " << run << " in the DOM:\n"
                                   << svg;
      EXPECT_GE(point_count(points), 2) << id << ": " << points;
    }
  }
  CliRun shot =
      shell(browse + "--window-size=1600,1400 --screenshot=" + dir.file("shot.png") + " " + page + " 2>&1");
  ASSERT_EQ(shot.code, 0) << "chromium --screenshot failed:\n" << shot.output;
  // The runs' colours: run_colour(0) and run_colour(1) of host/report/svg_chart.cpp.
  const Pixels pixels = read_png(read_file(dir.file("shot.png")));
  ASSERT_TRUE(pixels.error.empty()) << dir.file("shot.png") << ": " << pixels.error;
  // Two rows of charts are in the window. A legend's swatch paints 84
  // pixels (28 x 3) in its run's colour, the legends in view some 500;
  // each run's lines there paint some 2000 more (measured: 2500-2900).
  EXPECT_GT(count(pixels, 0x1f77b4), 1200u) << "the first run's colour is hardly painted";
  EXPECT_GT(count(pixels, 0xd62728), 1200u) << "the second run's colour is hardly painted";
}

}  // namespace
}  // namespace tandem::test
