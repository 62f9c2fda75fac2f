// Calling into a plugin from the host: a C++ exception that escapes the
// plugin (sdk/ABI.md rule 14 forbids it, but a table filled by hand may let
// one through) is caught at the boundary and becomes TDM_INTERNAL, with the
// last-error slot naming the plugin, the function and the exception, so the
// caller's message names the node or device like any other failure.
#pragma once

#include <string>
#include <utility>

#include "plugin/loaded_plugin.hpp"
#include "tandem/plugin_check.hpp"
#include "util/last_error.hpp"

namespace tandem::host {

template <class Fn>
tdm_status call_plugin(const LoadedPlugin& plugin, const char* function, Fn&& fn) noexcept {
  std::string escaped;
  const tdm_status status = plugin_check::call_catching(function, escaped, std::forward<Fn>(fn));
  if (!escaped.empty()) record_last_error(TDM_INTERNAL, plugin.name, std::move(escaped));
  return status;
}

}  // namespace tandem::host
