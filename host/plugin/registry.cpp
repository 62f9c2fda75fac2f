#include "plugin/registry.hpp"

#include "plugin/loader.hpp"
#include "plugin/plugin_call.hpp"
#include "tandem/plugin_check.hpp"
#include "util/logger.hpp"

namespace fs = std::filesystem;

namespace tandem::host {

PluginRegistry PluginRegistry::discover(const DiscoveryOptions& options, HostServices& services) {
  PluginRegistry registry(services);
  registry.search_dirs_ = plugin_search_dirs(options);
  registry.override_plugins_ = options.override_plugins;
  for (const SearchDir& dir : registry.search_dirs_) {
    std::error_code ec;
    if (dir.system && fs::is_directory(dir.path, ec)) registry.system_dirs_.push_back(dir.path);
  }
  for (const SearchDir& dir : registry.search_dirs_) {
    if (!dir.note.empty()) {
      log_info("plugin directory " + dir.path.string() + " (" + dir.origin + "): skipped, " + dir.note);
      continue;
    }
    log_info("searching plugin directory " + dir.path.string() + " (" + dir.origin + ")");
    for (const fs::path& file : plugin_files_in(dir.path)) {
      Result<const LoadedPlugin*> loaded =
          registry.load(file, dir.origin, options.allow_insecure, !dir.system);
      (void)loaded;  // recorded as a candidate either way
    }
  }
  return registry;
}

Result<const LoadedPlugin*> PluginRegistry::load(const fs::path& file, const std::string& origin,
                                                 bool allow_insecure, bool from_user_dir) {
  log_info("trying plugin " + file.string());
  // A file named after a plugin we already have is not even opened: opening
  // a second copy of a vendor-backed library is what we want to avoid.
  std::string file_name = plugin_name_from_file(file);
  if (const LoadedPlugin* first = find(file_name)) {
    std::string reason = "duplicate of " + first->name + " already loaded from " + first->path.string();
    record(file, origin, false, reason);
    return make_error(reason, TDM_INVALID_ARGUMENT);
  }
  if (Result<void> own_name = check_shadowing(file, file_name, from_user_dir); !own_name) {
    record(file, origin, false, own_name.error().message);
    return own_name.error();
  }

  Result<LoadedPlugin> plugin = load_plugin_file(file, *services_, LoadFileOptions{allow_insecure});
  if (!plugin) {
    record(file, origin, false, plugin.error().message);
    return plugin.error();
  }
  if (const LoadedPlugin* first = find(plugin->name)) {
    std::string reason = "duplicate of " + first->name + " already loaded from " + first->path.string();
    record(file, origin, false, reason);
    return make_error(reason, TDM_INVALID_ARGUMENT);
  }
  if (plugin->name != file_name)  // the descriptor may claim another plugin's name
    if (Result<void> claimed = check_shadowing(file, plugin->name, from_user_dir); !claimed) {
      record(file, origin, false, claimed.error().message);
      return claimed.error();
    }
  Result<void> init = init_plugin(*plugin, services_->config());
  if (!init) {
    record(file, origin, false, init.error().message);
    return init.error();
  }
  plugins_.push_back(std::make_unique<LoadedPlugin>(std::move(*plugin)));
  record(file, origin, true, "");
  return plugins_.back().get();
}

Result<void> PluginRegistry::check_shadowing(const fs::path& file, const std::string& name,
                                             bool from_user_dir) const {
  if (!from_user_dir) return {};
  std::optional<fs::path> installed = plugin_check::shadowed_plugin(file, name, system_dirs_);
  if (!installed) return {};
  if (override_plugins_.count(name) == 0) {
    plugin_check::Refusal refused = plugin_check::shadow_refusal(file, name, *installed);
    return make_error(refused.message, refused.status);
  }
  log_warning(plugin_check::override_warning(file, name, *installed));
  return {};
}

void PluginRegistry::record(const fs::path& file, const std::string& origin, bool loaded,
                            std::string reason) {
  if (loaded)
    log_info("loaded plugin " + file.string());
  else if (reason.rfind("duplicate of ", 0) == 0)
    log_info("skipped " + file.string() + ": " + reason);
  else
    log_warning("skipped " + file.string() + ": " + reason);
  candidates_.push_back({file, origin, loaded, std::move(reason)});
}

const LoadedPlugin* PluginRegistry::find(const std::string& name) const {
  if (name.empty()) return nullptr;
  for (const auto& p : plugins_)
    if (p->name == name) return p.get();
  return nullptr;
}

std::vector<const LoadedPlugin*> PluginRegistry::by_kind(tdm_plugin_kind kind) const {
  std::vector<const LoadedPlugin*> out;
  for (const auto& p : plugins_)
    if (p->kind == kind) out.push_back(p.get());
  return out;
}

std::vector<const LoadedPlugin*> PluginRegistry::plugins() const {
  std::vector<const LoadedPlugin*> out;
  for (const auto& p : plugins_) out.push_back(p.get());
  return out;
}

std::vector<Candidate> PluginRegistry::skipped() const {
  std::vector<Candidate> out;
  for (const Candidate& c : candidates_)
    if (!c.loaded) out.push_back(c);
  return out;
}

void PluginRegistry::shutdown() {
  for (auto it = plugins_.rbegin(); it != plugins_.rend(); ++it) {
    LoadedPlugin& p = **it;
    if (p.initialized && p.descriptor->shutdown != nullptr &&
        call_plugin(p, "shutdown", [&] { p.descriptor->shutdown(); }) != TDM_OK)
      log_warning("plugin " + p.name + " (" + p.path.string() + "): " + last_error_text("shutdown failed"));
    p.initialized = false;
  }
}

}  // namespace tandem::host
