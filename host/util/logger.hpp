// The host logger: one line per message on stderr, filtered by level.
//
//   tandem: [onednn] message        a plugin's line, attributed by its ctx
//   tandem: warning: message        a host line at warning level
//
// Thread-safe. Tests may redirect lines with set_sink.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "tandem/types.h"

namespace tandem::host {

enum class LogLevel {
  error = TDM_LOG_ERROR,
  warning = TDM_LOG_WARNING,
  info = TDM_LOG_INFO,
  debug = TDM_LOG_DEBUG
};

std::optional<LogLevel> parse_log_level(std::string_view text);
const char* log_level_name(LogLevel level);
LogLevel log_level_from_c(tdm_log_level level);

class Logger {
 public:
  using Sink = std::function<void(LogLevel, const std::string& line)>;

  static Logger& global();

  void set_level(LogLevel level);
  LogLevel level() const;
  bool enabled(LogLevel level) const;
  // Replaces stderr as the destination (tests); an empty sink restores stderr.
  void set_sink(Sink sink);

  // One process of a parallel run: its lines start "tandem[rank 1 of 2]: "
  // instead of "tandem: ", so the launcher's merged output says whose they
  // are. Empty (a single process) keeps "tandem: ".
  void set_rank_tag(std::string tag);
  // "tandem: " or "tandem[<tag>]: ", what every line of this process starts with.
  std::string prefix() const;

  // `source` is a plugin name, or empty for the host itself.
  void write(LogLevel level, std::string_view source, std::string_view message);

 private:
  mutable std::mutex mutex_;
  LogLevel level_ = LogLevel::warning;
  Sink sink_;
  std::string rank_tag_;
};

inline void log_error(std::string_view message) {
  Logger::global().write(LogLevel::error, {}, message);
}
inline void log_warning(std::string_view message) {
  Logger::global().write(LogLevel::warning, {}, message);
}
inline void log_info(std::string_view message) {
  Logger::global().write(LogLevel::info, {}, message);
}
inline void log_debug(std::string_view message) {
  Logger::global().write(LogLevel::debug, {}, message);
}

}  // namespace tandem::host
