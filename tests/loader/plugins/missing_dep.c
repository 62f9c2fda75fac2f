/* A plugin whose dependency libtandem_test_missing_dep.so cannot be found. */
#include <string.h>

#include "tandem/plugin.h"

int tandem_test_missing_dep_value(void);

static tdm_plugin g_plugin;

TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major, uint32_t minor) {
  (void)host;
  (void)major;
  (void)minor;
  memset(&g_plugin, 0, sizeof g_plugin);
  g_plugin.struct_size = (uint32_t)tandem_test_missing_dep_value();
  return &g_plugin;
}
