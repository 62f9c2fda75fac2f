#include "exec/stream_plan.hpp"

#include <algorithm>
#include <map>

namespace tandem::host::exec {
namespace {

// The units of stream_plan.hpp: where each begins, and which each touching
// position belongs to.
struct Units {
  std::vector<size_t> starts;
  std::map<size_t, size_t> of;  // touching position -> unit
  size_t positions = 0;

  size_t fetch_from(size_t unit, size_t depth) const { return starts[unit >= depth ? unit - depth : 0]; }
  size_t write_until(size_t unit, size_t depth) const {
    const size_t next = unit + depth + 1;
    return next < starts.size() ? starts[next] - 1 : positions - 1;
  }
};

bool touches_streamed(const NodeTouches& node, const std::set<ValueId>& streamed) {
  const auto in = [&](ValueId v) { return streamed.count(v) > 0; };
  return std::any_of(node.reads.begin(), node.reads.end(), in) ||
         std::any_of(node.writes.begin(), node.writes.end(), in);
}

Units find_units(const std::vector<NodeTouches>& nodes, const std::set<ValueId>& streamed) {
  Units units;
  units.positions = nodes.size();
  size_t segment_start = 0;
  bool segment_counted = false;
  for (size_t p = 0; p < nodes.size(); ++p) {
    if (p > 0 && nodes[p].layer != nodes[p - 1].layer) {
      segment_start = p;
      segment_counted = false;
    }
    if (!touches_streamed(nodes[p], streamed)) continue;
    if (!segment_counted) {
      units.starts.push_back(segment_start);
      segment_counted = true;
    }
    units.of[p] = units.starts.size() - 1;
  }
  return units;
}

// Closes a residency: its fetch and write-home flags and its interval.
Residency finished(Residency r, const Units& units, size_t depth) {
  r.fetch = r.touches.front().reads;
  r.write_home = std::any_of(r.touches.begin(), r.touches.end(), [](const Touch& t) { return t.writes; });
  r.start = r.fetch ? units.fetch_from(units.of.at(r.first()), depth) : r.first();
  r.end = r.write_home ? std::max(r.last(), units.write_until(units.of.at(r.last()), depth)) : r.last();
  return r;
}

}  // namespace

std::vector<Residency> plan_residencies(const std::vector<NodeTouches>& nodes,
                                        const std::set<ValueId>& streamed, size_t depth) {
  const Units units = find_units(nodes, streamed);
  std::map<ValueId, std::vector<Touch>> touches;
  for (size_t p = 0; p < nodes.size(); ++p) {
    std::map<ValueId, Touch> here;
    for (ValueId v : nodes[p].reads)
      if (streamed.count(v) > 0) here[v].reads = true;
    for (ValueId v : nodes[p].writes)
      if (streamed.count(v) > 0) here[v].writes = true;
    for (auto& [v, t] : here) {
      t.position = p;
      touches[v].push_back(t);
    }
  }
  std::vector<Residency> out;
  for (const auto& [value, list] : touches) {
    Residency current{value, {list.front()}};
    for (size_t i = 1; i < list.size(); ++i) {
      const Residency closed = finished(current, units, depth);
      // Where a new residency from this touch would begin: fetched d units
      // ahead when it reads, else at the touch itself.
      const size_t begins =
          list[i].reads ? units.fetch_from(units.of.at(list[i].position), depth) : list[i].position;
      if (begins > closed.end) {
        out.push_back(closed);
        current = Residency{value, {list[i]}};
      } else {
        current.touches.push_back(list[i]);
      }
    }
    out.push_back(finished(current, units, depth));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Residency& a, const Residency& b) { return a.start < b.start; });
  return out;
}

size_t window_peak(const std::vector<Residency>& residencies, const std::vector<size_t>& bytes_of) {
  std::map<size_t, long long> change;  // position -> bytes that start (+) or end (-) there
  for (size_t i = 0; i < residencies.size(); ++i) {
    change[residencies[i].start] += static_cast<long long>(bytes_of[i]);
    change[residencies[i].end + 1] -= static_cast<long long>(bytes_of[i]);
  }
  long long live = 0, peak = 0;
  for (const auto& [position, delta] : change) {
    live += delta;
    peak = std::max(peak, live);
  }
  return static_cast<size_t>(peak);
}

}  // namespace tandem::host::exec
