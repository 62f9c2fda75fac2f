// Where plugins are looked for, in order (sdk/ABI.md rule 10):
//   1. --plugin-path directories (each ':'-separated, several allowed);
//   2. TANDEM_PLUGIN_PATH (':'-separated);
//   3. the install directory fixed at configure time;
//   4. <dir of the executable>/../<libdir>/tandem/plugins, so an installation
//      moved elsewhere (cmake --install --prefix) finds its own;
//   5. <dir of the executable>/../lib/tandem/plugins, so a build tree works.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tandem::host {

struct DiscoveryOptions {
  std::vector<std::string> plugin_paths;  // from --plugin-path
  // Each source can be overridden (tests); nullopt means "the real one".
  std::optional<std::string> env_path;               // TANDEM_PLUGIN_PATH
  std::optional<std::filesystem::path> install_dir;  // empty path disables
  // The build tree's directory; set (even empty), it also disables the
  // installation's directory beside the executable (entry 4).
  std::optional<std::filesystem::path> exe_relative_dir;  // empty path disables
  bool allow_insecure = false;                            // --allow-insecure-plugins
  // --override-plugin NAME: a plugin of this name from --plugin-path or
  // TANDEM_PLUGIN_PATH may replace the installed one (refused otherwise).
  std::set<std::string> override_plugins;
};

struct SearchDir {
  std::filesystem::path path;
  // "--plugin-path", "TANDEM_PLUGIN_PATH", "install directory",
  // "installation beside the program", "build tree"
  std::string origin;
  std::string note;  // why it is not searched ("does not exist"), empty when searched
  // The install directories or the build tree's: the plugins that came with
  // this host, which a user's directory may not shadow (sdk/ABI.md rule 10).
  bool system = false;
};

// The configured install directory (absolute; from CMake).
std::filesystem::path default_install_dir();
// <dir of /proc/self/exe>/../lib/tandem/plugins, or empty when unknown.
std::filesystem::path default_exe_relative_dir();
// <dir of /proc/self/exe>/../<the configured plugin directory, relative to
// the prefix>, or empty when unknown or configured absolute.
std::filesystem::path default_relocated_install_dir();

// Directories in search order; repeats and missing ones carry a note.
std::vector<SearchDir> plugin_search_dirs(const DiscoveryOptions& options);

// Plugin files in a directory, "libtandem-<name>.so", sorted by name so
// discovery is deterministic.
std::vector<std::filesystem::path> plugin_files_in(const std::filesystem::path& dir);

// "libtandem-cuda.so" -> "cuda"; empty when the name does not follow the rule.
std::string plugin_name_from_file(const std::filesystem::path& file);

}  // namespace tandem::host
