// The report of two trained runs as a browser shows it: headless Chromium
// (Debian's `chromium`, installed by the test when it runs as root and
// apt-get can) loads the page from the file, without network. Its DOM
// must hold every chart as an <svg> with a line of points for each run,
// and its screenshot must show both runs' colours painted. Without a
// Chromium the test is skipped with the reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>

#include "png_pixels.hpp"
#include "report_support.hpp"

namespace tandem::test {
namespace {

// The path of a Chromium, installing Debian's when root; empty with `why`.
std::string find_chromium(std::string& why) {
  const auto which = [] {
    CliRun r = shell("command -v chromium || command -v chromium-browser || command -v google-chrome");
    return r.code == 0 ? r.output.substr(0, r.output.find('\n')) : std::string();
  };
  if (std::string found = which(); !found.empty()) return found;
  if (::geteuid() != 0 || shell("command -v apt-get").code != 0) {
    why = "no chromium on PATH, and installing it needs root and apt-get (apt-get install chromium)";
    return "";
  }
  CliRun apt = shell("DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium");
  if (std::string found = which(); !found.empty()) return found;
  why = "apt-get install chromium failed: " +
        (apt.output.size() > 600 ? apt.output.substr(apt.output.size() - 600) : apt.output);
  return "";
}

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
  const std::string browse = "timeout 60 '" + chromium + "' --headless --disable-gpu --no-sandbox " +
                             "--user-data-dir=" + dir.file("profile") + " --hide-scrollbars ";
  CliRun dom = shell(browse + "--dump-dom " + page + " 2>/dev/null");
  ASSERT_EQ(dom.code, 0) << "chromium --dump-dom failed:\n" << dom.output;
  for (const char* id : kChartIds) {
    const std::string svg = chart_svg(dom.output, id);
    ASSERT_FALSE(svg.empty()) << "chart '" << id << "' is not in the DOM Chromium built:\n" << dom.output;
    EXPECT_EQ(svg.find("no-data"), std::string::npos) << id;
    for (const char* run : {"0", "1"}) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(svg, m,
                                    std::regex(std::string("data-run=\"") + run +
                                               "\">\\s*<polyline class=\"line\" points=\"([^\"]+)\"")))
          << "chart '" << id << "' has no line of run " << run << " in the DOM:\n"
          << svg;
      const std::string points = m[1];
      EXPECT_GE(std::count(points.begin(), points.end(), ','), 2) << id << ": " << points;
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
