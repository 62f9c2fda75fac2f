#include "util/format.hpp"

#include <array>
#include <cstdio>

namespace tandem::host {

std::string human_bytes(uint64_t bytes) {
  static constexpr std::array<const char*, 6> kUnits{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (unit == 0)
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string human_duration_us(double micros) {
  char text[32];
  if (micros >= 1e6)
    std::snprintf(text, sizeof text, "%.2f s", micros / 1e6);
  else if (micros >= 1e3)
    std::snprintf(text, sizeof text, "%.2f ms", micros / 1e3);
  else
    std::snprintf(text, sizeof text, "%.2f us", micros);
  return text;
}

std::vector<std::string> split_path_list(std::string_view list) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(':', start);
    if (end == std::string_view::npos) end = list.size();
    if (end > start) parts.emplace_back(list.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

}  // namespace tandem::host
