// MPI comm plugin — the entry point (the one exported symbol), init and
// shutdown, and the versions shown by `tandem plugins`.
#include "comm.hpp"
#include "runtime.hpp"

namespace {

tandem::PluginInfo info() {
  tandem::PluginInfo i{"mpi",
                       "0.1.0",
                       "Collectives between CPU processes over MPI (Open MPI), with per-collective timeouts",
                       {}};
  // MPI_Get_library_version and MPI_Get_version may be called before MPI_Init.
  i.vendors.push_back(tandem::mpi::library_version());
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  i.vendors.emplace_back("MPI standard", std::to_string(major) + "." + std::to_string(minor));
  return i;
}

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  try {
    const tdm_plugin* base = tandem::comm_entry<tandem::mpi::MpiComm>(host, major, minor, info());
    if (base == nullptr) return nullptr;
    // comm_entry fills the table; shutdown is added here. There is no
    // init: MPI_Init_thread starts Open MPI's progress threads and, outside
    // mpirun, a helper daemon (orted), so it runs only when the host creates
    // the first communicator (MpiComm), which it does only when the launch
    // asks for several ranks. A single-process run never starts MPI.
    static tdm_plugin plugin;
    plugin = *base;
    plugin.shutdown = [] { tandem::mpi::runtime_shutdown(); };
    return &plugin;
  } catch (...) {  // info() allocates; nothing may escape a C entry point
    return nullptr;
  }
}
