// What the browser tests share: finding (or installing) a headless
// Chromium, and the points of a run's line in the DOM it built.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <regex>
#include <string>

#include "shell.hpp"

namespace tandem::test {

// The path of a Chromium, installing Debian's when root; empty with `why`.
inline std::string find_chromium(std::string& why) {
  const auto which = [] {
    CliRun r = shell("command -v chromium || command -v chromium-browser || command -v google-chrome");
    return r.code == 0 ? r.output.substr(0, r.output.find('\n')) : std::string();
  };
  if (std::string found = which(); !found.empty()) return found;
  if (::geteuid() != 0 || shell("command -v apt-get").code != 0) {
    why = "no chromium on PATH, and installing it needs root and apt-get (apt-get install chromium)";
    return "";
  }
  // Another installer (packaging.deb, the other browser test, a system
  // update) may hold the dpkg lock: wait for it rather than skip.
  CliRun apt =
      shell("DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q chromium");
  if (std::string found = which(); !found.empty()) return found;
  why = "apt-get install chromium failed: " +
        (apt.output.size() > 600 ? apt.output.substr(apt.output.size() - 600) : apt.output);
  return "";
}

// The start of a headless Chromium command line that loads local files
// only, with its profile in `profile_dir`.
inline std::string headless(const std::string& chromium, const std::string& profile_dir) {
  return "timeout 60 '" + chromium +
         "' --headless --disable-gpu --no-sandbox --user-data-dir=" + profile_dir + " --hide-scrollbars ";
}

// The "x,y x,y ..." points of run `run`'s line in a chart's <svg>; empty
// when the chart has no line for that run.
inline std::string line_points(const std::string& svg, int run) {
  std::smatch m;
  const std::regex line("data-run=\"" + std::to_string(run) +
                        "\">\\s*<polyline class=\"line\" points=\"([^\"]+)\"");
  return std::regex_search(svg, m, line) ? std::string(m[1]) : std::string();
}

// How many points a polyline's "x,y x,y ..." holds.
inline long point_count(const std::string& points) {
  return std::count(points.begin(), points.end(), ',');
}

}  // namespace tandem::test
