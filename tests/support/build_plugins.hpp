// The plugins of the build tree (TANDEM_BUILD_PLUGIN_DIR), for tests that
// load real backends: no environment path, no install directory, and a
// group-writable (umask 002) build tree accepted — not what these tests check.
#pragma once

#include <filesystem>

#include "plugin/registry.hpp"

namespace tandem::test {

inline host::PluginRegistry build_plugins(host::HostServices& services) {
  host::DiscoveryOptions options;
  options.plugin_paths = {TANDEM_BUILD_PLUGIN_DIR};
  options.env_path = "";
  options.install_dir = std::filesystem::path();
  options.exe_relative_dir = std::filesystem::path();
  options.allow_insecure = true;
  return host::PluginRegistry::discover(options, services);
}

}  // namespace tandem::test
