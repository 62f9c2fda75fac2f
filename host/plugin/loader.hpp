// Opening one plugin file and checking it, stage by stage (sdk/ABI.md rules 8-12):
// file permissions, dlopen (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE, never
// unloaded), the entry symbol, the descriptor, versions, the kind's table.
// Every refusal is an Error whose message names the file and says what to do.
#pragma once

#include <filesystem>

#include "plugin/host_services.hpp"
#include "plugin/loaded_plugin.hpp"
#include "util/result.hpp"

namespace tandem::host {

struct LoadFileOptions {
  bool allow_insecure = false;
};

// Loads and checks `file`; does not call init.
Result<LoadedPlugin> load_plugin_file(const std::filesystem::path& file, HostServices& services,
                                      const LoadFileOptions& options);

// Calls the plugin's init once with its configuration section.
Result<void> init_plugin(LoadedPlugin& plugin, const ConfigStore& config);

}  // namespace tandem::host
