#include "util/last_error.hpp"

#include <iterator>
#include <utility>

namespace tandem::host {
namespace {
std::optional<LastError>& slot() {
  thread_local std::optional<LastError> error;
  return error;
}
}  // namespace

void record_last_error(tdm_status code, std::string source, std::string message) {
  // A plugin reporting the failure of a host service it called (a feature
  // pass's graph insert, a hook's tensor read) keeps the host's reason for
  // it: "[amp] graph edit: inserting node 'x' failed: attention: lse must be
  // f32[...]".
  std::optional<LastError>& last = slot();
  const auto host_side = [](const std::string& s) { return s == "graph" || s == kHostSource; };
  if (last && host_side(last->source) && !host_side(source) && !last->message.empty())
    message += ": " + last->message;
  last = LastError{code, std::move(source), std::move(message)};
}

std::optional<LastError> take_last_error() {
  std::optional<LastError> error = std::move(slot());
  slot().reset();
  return error;
}

void clear_last_error() {
  slot().reset();
}

std::string last_error_text(const std::string& fallback) {
  std::optional<LastError> error = take_last_error();
  if (!error || error->message.empty()) return fallback;
  if (error->source.empty()) return error->message;
  return "[" + error->source + "] " + error->message;
}

std::string silent_failure(tdm_status status) {
  static const char* const kNames[] = {
      "TDM_OK",          "TDM_UNSUPPORTED",      "TDM_INVALID_ARGUMENT", "TDM_OUT_OF_MEMORY", "TDM_NOT_FOUND",
      "TDM_UNAVAILABLE", "TDM_VERSION_MISMATCH", "TDM_TIMEOUT",          "TDM_ABORTED",       "TDM_INTERNAL"};
  const auto index = static_cast<size_t>(status);
  const std::string name = index < std::size(kNames) ? kNames[index] : "status " + std::to_string(status);
  return name +
         " (the plugin gave no message: a plugin calls set_error on the thread that returns the status)";
}

}  // namespace tandem::host
