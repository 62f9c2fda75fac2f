// The test plugins that present one of the build's plugins differently
// (mpi_abi15, mpi_told, offhost): the plugin at `path` loaded as the host
// loads plugins (its own symbols, never unloaded), its entry point called
// with the host's arguments. Null, with the error set through `host`, when
// it cannot be loaded or refuses.
#pragma once

#include <dlfcn.h>

#include <tandem/plugin.h>

inline const tdm_plugin* load_wrapped_plugin(const char* path, const char* wrapper, const tdm_host_api* host,
                                             uint32_t major, uint32_t minor) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (library == nullptr) {
    host->set_error(host->ctx, TDM_UNAVAILABLE, "%s: cannot load %s: %s", wrapper, path, dlerror());
    return nullptr;
  }
  auto entry = reinterpret_cast<tdm_plugin_entry_fn>(dlsym(library, TDM_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) {
    host->set_error(host->ctx, TDM_UNAVAILABLE, "%s: %s has no entry point", wrapper, path);
    return nullptr;
  }
  return entry(host, major, minor);  // null: its error is set
}
