// Tandem SDK — sizes as people write them ("512MiB", "2 GiB", "4096"), part
// of the header-only C++ helper: one grammar for the host's --memory-budget,
// a plugin's size options and TANDEM_DEVICE_MEMORY_LIMIT.
#ifndef TANDEM_BYTE_SIZE_HPP
#define TANDEM_BYTE_SIZE_HPP

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace tandem {

// A positive number, optionally followed (spaces allowed) by B, KiB, MiB or
// GiB; nullopt for anything else, 2^64 bytes or more included. The result
// is rounded down to whole bytes.
inline std::optional<uint64_t> parse_byte_size(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double number = std::strtod(begin, &end);
  if (end == begin || !(number > 0)) return std::nullopt;
  std::string unit(end);
  const size_t first = unit.find_first_not_of(' ');
  unit =
      first == std::string::npos ? std::string() : unit.substr(first, unit.find_last_not_of(' ') - first + 1);
  const double scale = unit.empty() || unit == "B" ? 1.0
                       : unit == "KiB"             ? 1024.0
                       : unit == "MiB"             ? 1024.0 * 1024
                       : unit == "GiB"             ? 1024.0 * 1024 * 1024
                                                   : 0.0;
  // 2^64 and above do not fit (and converting them would be undefined).
  if (scale == 0.0 || !(number * scale < 18446744073709551616.0)) return std::nullopt;
  return static_cast<uint64_t>(number * scale);
}

}  // namespace tandem

#endif  // TANDEM_BYTE_SIZE_HPP
