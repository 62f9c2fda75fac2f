// The plugins this process loaded, and every candidate it tried.
//
// discover() walks the search path (search_path.hpp) in order; within a
// directory files are taken in name order. The first plugin of a name wins;
// a later one is skipped as a duplicate. Each accepted plugin is initialised
// once; shutdown() (or the destructor) calls shutdown in reverse order.
// A plugin from a user's directory (--plugin-path, TANDEM_PLUGIN_PATH) named
// like one of the system directories' is refused, unless the user named it
// with --override-plugin: then it wins, with a warning on every command
// (tandem/plugin_check.hpp, check 5; the conformance kit applies the same).
#pragma once

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "plugin/host_services.hpp"
#include "plugin/loaded_plugin.hpp"
#include "plugin/search_path.hpp"
#include "util/result.hpp"

namespace tandem::host {

struct Candidate {
  std::filesystem::path path;
  std::string origin;  // which search-path entry it came from
  bool loaded = false;
  std::string reason;  // why it was skipped; empty when loaded
};

class PluginRegistry {
 public:
  explicit PluginRegistry(HostServices& services) : services_(&services) {}
  PluginRegistry(PluginRegistry&&) = default;
  PluginRegistry& operator=(PluginRegistry&&) = delete;
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;
  ~PluginRegistry() { shutdown(); }

  static PluginRegistry discover(const DiscoveryOptions& options, HostServices& services);

  // Tries one file: checks, entry, init. Records the candidate either way.
  // `from_user_dir`: found in a user's directory, so it may not shadow a
  // plugin of the system directories (discover sets it).
  Result<const LoadedPlugin*> load(const std::filesystem::path& file, const std::string& origin,
                                   bool allow_insecure, bool from_user_dir = false);

  const LoadedPlugin* find(const std::string& name) const;
  std::vector<const LoadedPlugin*> by_kind(tdm_plugin_kind kind) const;
  std::vector<const LoadedPlugin*> plugins() const;
  const std::vector<Candidate>& candidates() const noexcept { return candidates_; }
  std::vector<Candidate> skipped() const;
  const std::vector<SearchDir>& search_dirs() const noexcept { return search_dirs_; }

  // Calls each plugin's shutdown once, last loaded first.
  void shutdown();

 private:
  void record(const std::filesystem::path& file, const std::string& origin, bool loaded, std::string reason);
  // An error when `file` from a user's directory would replace the system
  // plugin `name` without --override-plugin; warns when it does with it.
  Result<void> check_shadowing(const std::filesystem::path& file, const std::string& name,
                               bool from_user_dir) const;

  HostServices* services_;
  std::vector<std::unique_ptr<LoadedPlugin>> plugins_;
  std::vector<Candidate> candidates_;
  std::vector<SearchDir> search_dirs_;
  std::vector<std::filesystem::path> system_dirs_;  // existing system directories, in search order
  std::set<std::string> override_plugins_;
};

}  // namespace tandem::host
