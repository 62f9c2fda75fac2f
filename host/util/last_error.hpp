// The thread-local last-error slot behind tdm_host_api.set_error.
//
// A plugin records the message explaining the status it is about to return;
// the host reads (and clears) the slot right after a call returns non-OK.
// Each thread has its own slot, so concurrent plugin calls never mix.
#pragma once

#include <optional>
#include <string>

#include "tandem/types.h"

namespace tandem::host {

struct LastError {
  tdm_status code = TDM_OK;
  std::string source;  // plugin name ("onednn") or host component ("graph")
  std::string message;
};

// The source of a refusal by a host service a plugin called (the run's
// tensors); "graph" is the graph API's. A plugin's own message recorded
// after either keeps the host's reason appended.
inline constexpr const char* kHostSource = "host";

void record_last_error(tdm_status code, std::string source, std::string message);
// Returns and clears this thread's slot.
std::optional<LastError> take_last_error();
void clear_last_error();

// "[onednn] <message>" from the slot, or `fallback` when the plugin gave
// no reason. Clears the slot.
std::string last_error_text(const std::string& fallback);

// What a failed call says when its plugin gave no message: the status's
// name, and how a plugin gives one (set_error on the thread that returns
// the status, sdk/ABI.md).
std::string silent_failure(tdm_status status);

}  // namespace tandem::host
