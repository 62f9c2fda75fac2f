// What profiling records (ExecutorOptions::profile): every node execution
// and each node's accumulated wall time. Both kinds of executor keep one; a
// composed executor maps its parts' records onto its global schedule.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace tandem::host::exec {

// One node execution, for a Chrome trace ("X" events): microseconds since
// the executor was created.
struct ProfileEvent {
  size_t node = 0;  // schedule position
  double start_us = 0;
  double dur_us = 0;
};

// A streamed value's copy between host memory and the device, as the copy
// thread saw it (streamed_state.hpp), on the same clock.
struct CopyEvent {
  std::string value;
  bool to_device = true;  // a fetch; else a write home
  size_t bytes = 0;
  double start_us = 0;
  double dur_us = 0;
};

struct NodeProfile {
  // The instant event times count from: the executor's creation.
  std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
  std::vector<double> time_us;  // accumulated, by schedule position
  std::vector<ProfileEvent> events;
  std::vector<CopyEvent> copies;

  // Forgets what was recorded; the epoch stays, so later events keep
  // counting from the same instant.
  void clear() {
    std::fill(time_us.begin(), time_us.end(), 0.0);
    events.clear();
    copies.clear();
  }
};

}  // namespace tandem::host::exec
