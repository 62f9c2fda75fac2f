// Reference backend — the plugin entry point (the one exported symbol).
#include "device.hpp"

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  try {
    return tandem::backend_entry<tandem::reference::ReferenceBackend>(
        host, major, minor,
        {"reference", "1.0.0", "Plain C++ implementation of the whole op catalog: the numerical oracle", {}});
  } catch (...) {  // the descriptor's strings allocate; nothing may escape a C entry point
    return nullptr;
  }
}
