/* A plugin that says it was built for Tandem ABI 2.0: the host must refuse it. */
#include <string.h>

#include "tandem/plugin.h"

static tdm_backend_api g_api;
static tdm_plugin g_plugin;

TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major, uint32_t minor) {
  (void)host;
  (void)major;
  (void)minor;
  memset(&g_api, 0, sizeof g_api);
  g_api.struct_size = sizeof g_api;
  memset(&g_plugin, 0, sizeof g_plugin);
  g_plugin.struct_size = sizeof g_plugin;
  g_plugin.abi_major = 2;
  g_plugin.abi_minor = 0;
  g_plugin.name = "testmajor2";
  g_plugin.kind = TDM_PLUGIN_BACKEND;
  g_plugin.version = "2.0.0";
  g_plugin.sdk_version = "2.0.0";
  g_plugin.description = "pretends to be built against SDK 2";
  g_plugin.backend = &g_api;
  return &g_plugin;
}
