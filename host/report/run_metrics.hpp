// A training run as `tandem report` draws it: the series, memory and
// placement records of <run-dir>/metrics.jsonl (train/progress.hpp writes
// them, one JSON object per line).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/result.hpp"

namespace tandem::host::report {

struct Point {
  double step = 0;
  double value = 0;
};

// One device's memory: what the plan promised and what its allocator held
// at most, during the training steps and with evaluation (0: not measured).
struct DeviceMemory {
  std::string device;
  uint64_t planned = 0, training_peak = 0, peak = 0;
};

struct PlacedCopy {
  std::string value, from, to, producer_layer, consumer_layer;
  uint64_t bytes = 0;
};

// Where a run of several devices put each layer and the copies between
// devices each step ("placement" record).
struct RunPlacement {
  std::string mode;                                         // auto | pinned | strict
  std::vector<std::pair<std::string, std::string>> layers;  // layer -> device, in model order
  std::vector<PlacedCopy> copies;
};

struct RunMetrics {
  std::string dir;
  // By series name (series.hpp), ordered by step, one value per step (a
  // resumed run's later record of a step replaces the earlier one). Null
  // values (a non-finite loss) are left out.
  std::map<std::string, std::vector<Point>> series;
  std::vector<DeviceMemory> memory;       // the last record of each device, in order of first appearance
  std::optional<RunPlacement> placement;  // the last one recorded
};

// Reads `dir`/metrics.jsonl. Errors name the directory, or the file and
// line, and what to do.
Result<RunMetrics> read_run(const std::string& dir);

}  // namespace tandem::host::report
