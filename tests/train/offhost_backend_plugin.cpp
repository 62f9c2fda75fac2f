// A backend whose memory the host is told it cannot address, for the
// host's ways with a GPU's memory on a machine without one: the build's
// reference plugin, loaded as it is, presented as "offhost" with devices
// that report host_addressable = 0. The host then moves every byte through
// the table's copies and streams, joins its ranks on the device's memory
// (mpi, as the device is a CPU), and gathers host bytes through device
// buffers, as it does on a GPU. The kernels and memory are the reference
// plugin's own, so the results must be its bits.
#include "wrapped_plugin.hpp"

namespace {

tdm_status (*g_reference_info)(tdm_device*, tdm_device_info*) = nullptr;

tdm_status device_info(tdm_device* device, tdm_device_info* out) {
  const tdm_status status = g_reference_info(device, out);
  if (status == TDM_OK) out->host_addressable = 0;
  return status;
}

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  const tdm_plugin* base = load_wrapped_plugin(TANDEM_REFERENCE_PLUGIN_PATH, "offhost", host, major, minor);
  if (base == nullptr || base->backend == nullptr) return nullptr;  // its error is set
  static tdm_backend_api apart;
  apart = *base->backend;
  g_reference_info = base->backend->device_info;
  apart.device_info = device_info;
  static tdm_plugin plugin;
  plugin = *base;
  plugin.name = "offhost";
  plugin.description = "The reference backend, its memory reported as not the host's (a test plugin)";
  plugin.backend = &apart;
  return &plugin;
}
