// The tdm_host_api implementation (sdk/ABI.md rule 15).
//
// Each loaded plugin gets its own table whose ctx is a PluginContext naming
// the plugin and its file, so every log line and error is attributed.
// Tables are handed to plugin code that may keep them until the process
// exits, so contexts are never freed (see keep_alive in host_services.cpp).
#pragma once

#include <memory>
#include <string>

#include "plugin/config_store.hpp"
#include "tandem/host_api.h"

namespace tandem::host {

class HostServices;

struct PluginContext {
  std::string name;  // descriptor name once known, the file's name before
  std::string path;
  std::shared_ptr<ConfigStore> config;
  tdm_host_api api{};
};

class HostServices {
 public:
  explicit HostServices(std::shared_ptr<ConfigStore> config = std::make_shared<ConfigStore>());

  // A new table for one plugin; valid until the process exits.
  PluginContext& create_context(const std::string& name, const std::string& path);

  ConfigStore& config() noexcept { return *config_; }

 private:
  std::shared_ptr<ConfigStore> config_;
};

}  // namespace tandem::host
