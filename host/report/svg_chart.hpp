// Line charts as inline SVG for `tandem report`: axes with ticks and
// labels, one colour per run, training solid and evaluation dashed with a
// marker per point. No script and no external reference: the page shows
// the same offline, in any browser, printed or mailed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report/run_metrics.hpp"

namespace tandem::host::report {

struct ChartLine {
  int run = 0;              // which run: its colour (run_colour)
  std::string name;         // the tooltip of its points: "runs/a eval loss"
  bool evaluation = false;  // dashed, a marker at each point
  std::vector<Point> points;
};

struct Chart {
  std::string id;       // an HTML id: "loss"
  std::string title;    // "Loss"
  std::string y_label;  // "loss"
  double y_scale = 1;   // values are drawn times this (100: a share as %)
  std::string no_data;  // what the chart says when no run has a point in it
  std::vector<ChartLine> lines;
};

// One <svg class="chart"> with the chart's id; with no point to draw, the
// axes frame says `no_data` instead.
std::string render_chart(const Chart& chart);

// A colour per run, distinct for the first ten and repeating after.
std::string run_colour(int run);

// Round ticks (1, 2 or 5 times a power of ten) from at or below `lo` to at
// or above `hi`, about `target` of them; `integers`: no step below 1.
std::vector<double> nice_ticks(double lo, double hi, int target, bool integers);
// A tick's text with as many decimals as `step` needs: "0.05", "1500".
std::string tick_label(double value, double step);

// Text safe inside HTML/SVG elements and quoted attributes.
std::string escape_html(std::string_view text);

}  // namespace tandem::host::report
