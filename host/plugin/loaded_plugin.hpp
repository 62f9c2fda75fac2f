// What the host knows about one plugin that passed every load check.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tandem/plugin.h"

namespace tandem::host {

struct PluginContext;

struct VendorVersion {
  std::string name;
  std::string version;
};

struct LoadedPlugin {
  std::string name;
  tdm_plugin_kind kind = TDM_PLUGIN_BACKEND;
  std::string version;
  std::string sdk_version;
  std::string description;
  std::vector<VendorVersion> vendors;
  std::filesystem::path path;
  uint32_t abi_major = 0;            // as the plugin reports it
  uint32_t abi_minor = 0;            // as the plugin reports it
  uint32_t abi_minor_effective = 0;  // min(host minor, plugin minor)

  // Plugin-owned static data, valid until the process exits.
  const tdm_plugin* descriptor = nullptr;
  const tdm_backend_api* backend = nullptr;
  const tdm_feature_api* feature = nullptr;
  const tdm_comm_api* comm = nullptr;
  PluginContext* context = nullptr;  // the host table given to this plugin
  bool initialized = false;
};

const char* plugin_kind_name(tdm_plugin_kind kind);
// The configuration section handed to init: "plugins.<name>" or "features.<name>".
std::string plugin_config_section(const LoadedPlugin& plugin);

}  // namespace tandem::host
