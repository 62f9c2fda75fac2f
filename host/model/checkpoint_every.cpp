#include "model/checkpoint_every.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace tandem::host::model {
namespace {

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// One "<number><unit>" item into `every`; false when it is not one.
bool read_item(const std::string& item, CheckpointEvery& every) {
  const char* begin = item.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(value) || value <= 0) return false;
  const std::string unit = trimmed(end);
  if (unit.empty() || unit == "steps" || unit == "step") {
    if (value != std::floor(value) || every.steps > 0) return false;
    every.steps = static_cast<int64_t>(value);
    return true;
  }
  double scale = 0;
  if (unit == "s" || unit == "sec" || unit == "seconds") scale = 1;
  if (unit == "m" || unit == "min" || unit == "minutes") scale = 60;
  if (unit == "h" || unit == "hours") scale = 3600;
  if (scale == 0 || every.seconds > 0) return false;
  every.seconds = value * scale;
  return true;
}

}  // namespace

Result<CheckpointEvery> parse_checkpoint_every(const std::string& text) {
  CheckpointEvery every;
  for (size_t start = 0, comma = 0; comma != std::string::npos; start = comma + 1) {
    comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!read_item(trimmed(item), every))
      return make_error(
          "'" + text +
              "' is not a checkpoint interval: give a number of steps and/or a time, each positive "
              "and given once, e.g. 500, \"500 steps\", \"15min\", \"90s\", \"2h\" or \"500 "
              "steps, 15min\"",
          TDM_INVALID_ARGUMENT);
  }
  return every;
}

std::string describe(const CheckpointEvery& every) {
  std::ostringstream out;
  if (every.steps > 0) out << every.steps << " steps";
  if (every.steps > 0 && every.seconds > 0) out << " or ";
  if (every.seconds >= 3600 && std::fmod(every.seconds, 3600) == 0)
    out << every.seconds / 3600 << " h";
  else if (every.seconds >= 60 && std::fmod(every.seconds, 60) == 0)
    out << every.seconds / 60 << " min";
  else if (every.seconds > 0)
    out << every.seconds << " s";
  return "every " + out.str();
}

}  // namespace tandem::host::model
