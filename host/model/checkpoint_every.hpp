// How often a run saves a checkpoint besides each epoch's end and a stop:
// every N optimizer steps, every so many minutes, or both (whichever comes
// first). Written "500" or "500 steps", "15min", "90s", "2h", or two of them
// with a comma: "500 steps, 15min". The same text in [train]
// checkpoint_every and `tandem train --checkpoint-every`.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.hpp"

namespace tandem::host::model {

struct CheckpointEvery {
  int64_t steps = 0;   // 0: not by steps
  double seconds = 0;  // 0: not by time
  bool any() const { return steps > 0 || seconds > 0; }
};

// An error says what was expected, with examples; the caller names where
// the text came from.
Result<CheckpointEvery> parse_checkpoint_every(const std::string& text);

// "every 500 steps or 15 min", for the run's start line.
std::string describe(const CheckpointEvery& every);

}  // namespace tandem::host::model
