/* Tandem SDK — the plugin descriptor and the one exported entry point.
 *
 * Lifecycle (sdk/ABI.md rule 12):
 *   load   the host opens libtandem-<name>.so and resolves TDM_PLUGIN_ENTRY;
 *   entry  tdm_plugin_entry(host, major, minor) checks versions and returns
 *          the descriptor (static storage, valid until the process exits);
 *   init   the host calls init once with the plugin's configuration section,
 *          before any other table function;
 *   use    the kind's table (backend, feature or comm);
 *   shutdown once, at exit. The library is never unloaded.
 */
#ifndef TANDEM_PLUGIN_H
#define TANDEM_PLUGIN_H

#include "tandem/backend.h"
#include "tandem/comm.h"
#include "tandem/feature.h"
#include "tandem/host_api.h"
#include "tandem/types.h"
#include "tandem/version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t tdm_plugin_kind;
enum { TDM_PLUGIN_BACKEND = 1, TDM_PLUGIN_FEATURE = 2, TDM_PLUGIN_COMM = 3 };

/* A vendor library the plugin depends on, and the version it found at run
 * time (e.g. {"cuDNN", "9.10.2"}); "not found" when it could not load it. */
typedef struct tdm_vendor_version {
  uint32_t struct_size;
  const char* name;
  const char* version;
} tdm_vendor_version;

typedef struct tdm_plugin {
  uint32_t struct_size;
  uint32_t abi_major; /* the SDK the plugin was built with: TDM_ABI_MAJOR */
  uint32_t abi_minor; /* TDM_ABI_MINOR */
  const char* name;   /* short, unique: "reference", "onednn", "amp" */
  tdm_plugin_kind kind;
  const char* version;     /* the plugin's own semantic version */
  const char* sdk_version; /* TDM_SDK_VERSION it was built with */
  const char* description; /* one line */
  const tdm_vendor_version* vendors;
  size_t n_vendors;

  /* Called once before any table function; `config` is the plugin's
   * section: what `tandem --plugin-option NAME.key=value` set for it, empty
   * without such options (sdk/ABI.md rule 38; host keys such as "threads"
   * come through config_get). Optional. */
  tdm_status (*init)(const tdm_config* config);
  /* Called once at exit; the plugin releases devices and threads. Optional. */
  void (*shutdown)(void);

  /* Exactly one of these is non-NULL, matching `kind`. The table is static
   * and valid until the process exits. */
  const tdm_backend_api* backend;
  const tdm_feature_api* feature;
  const tdm_comm_api* comm;
} tdm_plugin;

/* The one symbol a plugin exports. Returns NULL and calls host->set_error
 * when it refuses (e.g. host ABI major differs). Must not throw, must not
 * start threads (do that in init). */
#define TDM_PLUGIN_ENTRY_SYMBOL "tdm_plugin_entry"
typedef const tdm_plugin* (*tdm_plugin_entry_fn)(const tdm_host_api* host, uint32_t host_abi_major,
                                                 uint32_t host_abi_minor);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TANDEM_PLUGIN_H */
