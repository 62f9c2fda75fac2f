// Streamed state: persistent values (a layer's parameters, their gradients
// and optimizer state) whose home is host memory, and when each is on the
// device. Pure analysis of the schedule: the planner places the residencies
// in the arena (planner.hpp), StreamedState runs their copies
// (streamed_state.hpp).
//
// A streamed value's touches (schedule positions of the nodes that read or
// write its storage, in-place aliases included) are grouped into
// residencies: spans during which it is on the device. A residency is
// fetched from home before its first touch when that touch reads it (a
// gradient's first write needs nothing fetched), and written home after its
// last touch when any of its touches wrote it.
//
// Prefetch is counted in units: the runs of consecutive nodes of one layer
// that touch a streamed value (a block's linear forward, its backward, its
// optimizer update). With depth d, a residency whose first touch is in unit
// u is fetched from the start of unit u - d on, so the copy overlaps d units
// of compute; a write home after unit u has until unit u + d + 1 begins.
// Its bytes are held in the arena from the fetch's start to the write's
// end: the interval the planner packs, so the window is planned memory like
// every activation. Two touches far enough apart that those intervals would
// not overlap belong to separate residencies (dropped between them, fetched
// again); closer ones share one (kept).
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.hpp"

namespace tandem::host::exec {

// What one node touches, by storage owner (the planner's).
struct NodeTouches {
  std::string layer;
  std::vector<ValueId> reads, writes;
};

struct Touch {
  size_t position = 0;
  bool reads = false, writes = false;
};

struct Residency {
  ValueId value = kNoValue;    // the streamed storage owner
  std::vector<Touch> touches;  // in schedule order
  bool fetch = false;          // the first touch reads: copied in before it
  bool write_home = false;     // some touch writes: copied home after the last
  size_t start = 0, end = 0;   // schedule positions it holds its bytes (inclusive)
  size_t offset = 0;           // in the arena; set by the planner
  size_t first() const { return touches.front().position; }
  size_t last() const { return touches.back().position; }
};

// Residencies of every value in `streamed`, ordered by start. A streamed
// value no node touches has none (it stays at home).
std::vector<Residency> plan_residencies(const std::vector<NodeTouches>& nodes,
                                        const std::set<ValueId>& streamed, size_t depth);

// The most bytes residencies hold at any one position: the window's peak.
size_t window_peak(const std::vector<Residency>& residencies, const std::vector<size_t>& bytes_of);

}  // namespace tandem::host::exec
