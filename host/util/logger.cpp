#include "util/logger.hpp"

#include <cstdio>

namespace tandem::host {

std::optional<LogLevel> parse_log_level(std::string_view text) {
  if (text == "error") return LogLevel::error;
  if (text == "warning" || text == "warn") return LogLevel::warning;
  if (text == "info") return LogLevel::info;
  if (text == "debug") return LogLevel::debug;
  return std::nullopt;
}

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::error:
      return "error";
    case LogLevel::warning:
      return "warning";
    case LogLevel::info:
      return "info";
    case LogLevel::debug:
      return "debug";
  }
  return "?";
}

LogLevel log_level_from_c(tdm_log_level level) {
  if (level <= TDM_LOG_ERROR) return LogLevel::error;
  if (level >= TDM_LOG_DEBUG) return LogLevel::debug;
  return static_cast<LogLevel>(level);
}

Logger& Logger::global() {
  static Logger logger;
  return logger;
}

void Logger::set_level(LogLevel level) {
  std::lock_guard lock(mutex_);
  level_ = level;
}

LogLevel Logger::level() const {
  std::lock_guard lock(mutex_);
  return level_;
}

bool Logger::enabled(LogLevel level) const {
  return static_cast<int>(level) <= static_cast<int>(this->level());
}

void Logger::set_sink(Sink sink) {
  std::lock_guard lock(mutex_);
  sink_ = std::move(sink);
}

void Logger::set_rank_tag(std::string tag) {
  std::lock_guard lock(mutex_);
  rank_tag_ = std::move(tag);
}

std::string Logger::prefix() const {
  std::lock_guard lock(mutex_);
  return rank_tag_.empty() ? std::string("tandem: ") : "tandem[" + rank_tag_ + "]: ";
}

void Logger::write(LogLevel level, std::string_view source, std::string_view message) {
  std::string line = prefix();
  if (!source.empty()) line.append("[").append(source).append("] ");
  if (level == LogLevel::error) line += "error: ";
  if (level == LogLevel::warning) line += "warning: ";
  line.append(message);

  std::lock_guard lock(mutex_);
  if (static_cast<int>(level) > static_cast<int>(level_)) return;
  if (sink_) {
    sink_(level, line);
    return;
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace tandem::host
