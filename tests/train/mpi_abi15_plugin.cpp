// A comm plugin of ABI 1.15, for the pipeline's way with one
// (PipelineParallel.AnOlderCommPluginWithOnlyBlockingSendAndRecvTrainsAlike):
// the build's mpi plugin, loaded as it is, presented as "mpi_abi15" with the
// table of 1.15, whose point to point is the blocking send and recv only.
// Everything else is the mpi plugin's own.
#include "wrapped_plugin.hpp"

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  const tdm_plugin* mpi_plugin = load_wrapped_plugin(TANDEM_MPI_PLUGIN_PATH, "mpi_abi15", host, major, minor);
  if (mpi_plugin == nullptr || mpi_plugin->comm == nullptr) return nullptr;  // its error is set
  static tdm_comm_api older;
  older = *mpi_plugin->comm;
  older.struct_size = TDM_STRUCT_SIZE(tdm_comm_api, recv);
  older.send_start = nullptr;
  older.recv_start = nullptr;
  older.request_test = nullptr;
  static tdm_plugin plugin;
  plugin = *mpi_plugin;
  plugin.name = "mpi_abi15";
  plugin.abi_minor = 15;
  plugin.comm = &older;
  return &plugin;
}
