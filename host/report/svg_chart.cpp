#include "report/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace tandem::host::report {
namespace {

// The drawing area inside the SVG's viewBox.
constexpr double kWidth = 680, kHeight = 300;
constexpr double kLeft = 78, kRight = kWidth - 18, kTop = 36, kBottom = kHeight - 50;
// More points than a chart's width can show only make the page heavy.
constexpr size_t kMaxPoints = 1500;

std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

struct Range {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
  double step = 1;
  double place(double v, double from, double to) const { return from + (v - lo) / (hi - lo) * (to - from); }
};

Range make_range(double lo, double hi, bool integers) {
  if (hi <= lo) {
    const double pad = std::max(std::fabs(lo) * 0.1, integers ? 1.0 : 1e-3);
    lo -= pad;
    hi += pad;
  }
  Range r;
  r.ticks = nice_ticks(lo, hi, 6, integers);
  r.lo = r.ticks.front();
  r.hi = r.ticks.back();
  r.step = r.ticks.size() > 1 ? r.ticks[1] - r.ticks[0] : 1;
  return r;
}

// Every `stride`-th point and the last.
std::vector<Point> thinned(const std::vector<Point>& points) {
  if (points.size() <= kMaxPoints) return points;
  const size_t stride = (points.size() + kMaxPoints - 1) / kMaxPoints;
  std::vector<Point> out;
  for (size_t i = 0; i < points.size(); i += stride) out.push_back(points[i]);
  if (out.back().step != points.back().step) out.push_back(points.back());
  return out;
}

void axes(std::ostringstream& svg, const Chart& chart, const Range& x, const Range& y) {
  svg << "<g class=\"axes\" font-size=\"12\" fill=\"#333\">\n";
  for (double t : x.ticks) {
    const double px = x.place(t, kLeft, kRight);
    svg << "<line x1=\"" << num(px) << "\" y1=\"" << num(kTop) << "\" x2=\"" << num(px) << "\" y2=\""
        << num(kBottom) << "\" stroke=\"#e4e4e4\"/>"
        << "<text x=\"" << num(px) << "\" y=\"" << num(kBottom + 16) << "\" text-anchor=\"middle\">"
        << tick_label(t, x.step) << "</text>\n";
  }
  for (double t : y.ticks) {
    const double py = y.place(t, kBottom, kTop);
    svg << "<line x1=\"" << num(kLeft) << "\" y1=\"" << num(py) << "\" x2=\"" << num(kRight) << "\" y2=\""
        << num(py) << "\" stroke=\"#e4e4e4\"/>"
        << "<text x=\"" << num(kLeft - 6) << "\" y=\"" << num(py + 4) << "\" text-anchor=\"end\">"
        << tick_label(t, y.step) << "</text>\n";
  }
  svg << "<rect x=\"" << num(kLeft) << "\" y=\"" << num(kTop) << "\" width=\"" << num(kRight - kLeft)
      << "\" height=\"" << num(kBottom - kTop) << "\" fill=\"none\" stroke=\"#888\"/>\n"
      << "<text class=\"x-label\" x=\"" << num((kLeft + kRight) / 2) << "\" y=\"" << num(kHeight - 12)
      << "\" text-anchor=\"middle\">step</text>\n"
      << "<text class=\"y-label\" transform=\"translate(16 " << num((kTop + kBottom) / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">" << escape_html(chart.y_label) << "</text>\n</g>\n";
}

void line(std::ostringstream& svg, const ChartLine& l, double y_scale, const Range& x, const Range& y) {
  const std::string colour = run_colour(l.run);
  const std::vector<Point> points = thinned(l.points);
  std::ostringstream coords;
  for (const Point& p : points) {
    if (coords.tellp() > 0) coords << ' ';
    coords << num(x.place(p.step, kLeft, kRight)) << ',' << num(y.place(p.value * y_scale, kBottom, kTop));
  }
  const char* kind = l.evaluation ? "eval" : "train";
  svg << "<g class=\"series " << kind << "\" data-run=\"" << l.run << "\">\n";
  if (points.size() > 1)
    svg << "<polyline class=\"line\" points=\"" << coords.str() << "\" fill=\"none\" stroke=\"" << colour
        << "\" stroke-width=\"" << (l.evaluation ? "1.5" : "2") << "\""
        << (l.evaluation ? " stroke-dasharray=\"6 4\"" : "") << "/>\n";
  // A marker where a line would not show (one point) or where each point
  // is an evaluation worth reading off.
  if (l.evaluation || points.size() == 1)
    for (const Point& p : points)
      svg << "<circle class=\"point\" cx=\"" << num(x.place(p.step, kLeft, kRight)) << "\" cy=\""
          << num(y.place(p.value * y_scale, kBottom, kTop)) << "\" r=\"3.5\" fill=\"" << colour
          << "\"><title>" << escape_html(l.name) << " at step " << tick_label(p.step, 1) << ": "
          << p.value * y_scale << "</title></circle>\n";
  svg << "</g>\n";
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target, bool integers) {
  const double raw = (hi - lo) / std::max(target - 1, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;
  if (integers) step = std::max(step, 1.0);
  const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
  std::vector<double> ticks;
  for (double k = first; k <= last + 0.5; ++k) ticks.push_back(k * step);
  if (ticks.size() < 2) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string tick_label(double value, double step) {
  if (std::fabs(value) < std::fabs(step) * 1e-6) value = 0;  // not "-0" or "1e-17"
  char text[48];
  if (step < 1e-3 || std::fabs(value) >= 1e7) {
    std::snprintf(text, sizeof text, "%.3g", value);
  } else {
    const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
    std::snprintf(text, sizeof text, "%.*f", decimals, value);
  }
  return text;
}

std::string run_colour(int run) {
  static const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return kColours[static_cast<size_t>(run) % (sizeof kColours / sizeof kColours[0])];
}

std::string escape_html(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_chart(const Chart& chart) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const ChartLine& l : chart.lines)
    for (const Point& p : l.points) {
      x_lo = std::min(x_lo, p.step), x_hi = std::max(x_hi, p.step);
      y_lo = std::min(y_lo, p.value * chart.y_scale), y_hi = std::max(y_hi, p.value * chart.y_scale);
    }
  std::ostringstream svg;
  svg << "<svg class=\"chart\" id=\"" << escape_html(chart.id) << "\" viewBox=\"0 0 " << kWidth << ' '
      << kHeight << "\" width=\"" << kWidth << "\" height=\"" << kHeight << "\" role=\"img\" aria-label=\""
      << escape_html(chart.title) << "\">\n<text class=\"title\" x=\"" << num(kLeft) << "\" y=\"22\" "
      << "font-size=\"15\" font-weight=\"bold\">" << escape_html(chart.title) << "</text>\n";
  if (x_lo > x_hi) {
    svg << "<rect x=\"" << num(kLeft) << "\" y=\"" << num(kTop) << "\" width=\"" << num(kRight - kLeft)
        << "\" height=\"" << num(kBottom - kTop) << "\" fill=\"#fafafa\" stroke=\"#888\"/>\n"
        << "<text class=\"no-data\" x=\"" << num((kLeft + kRight) / 2) << "\" y=\""
        << num((kTop + kBottom) / 2) << "\" text-anchor=\"middle\" font-size=\"14\" fill=\"#666\">"
        << escape_html(chart.no_data) << "</text>\n</svg>\n";
    return svg.str();
  }
  const Range x = make_range(x_lo, x_hi, true), y = make_range(y_lo, y_hi, false);
  axes(svg, chart, x, y);
  for (const ChartLine& l : chart.lines)
    if (!l.points.empty()) line(svg, l, chart.y_scale, x, y);
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace tandem::host::report
