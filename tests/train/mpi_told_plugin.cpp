// A comm plugin that, like nccl, sends point to point only on a
// communicator it was told about at comm_create
// (tdm_comm_init_info.point_to_point, ABI 1.17): the build's mpi plugin,
// loaded as it is, presented as "mpi_told", whose started transfers on any
// other communicator fail naming it. A pipeline trains through it only if
// the host tells every communicator the stages' messages go over
// (PipelineParallel.TheStagesCommunicatorIsToldItCarriesPointToPoint).
#include <mutex>
#include <set>

#include "wrapped_plugin.hpp"

namespace {

const tdm_host_api* g_host = nullptr;
const tdm_comm_api* g_mpi = nullptr;
std::mutex g_mutex;
std::set<tdm_comm*> g_told;

tdm_status comm_create(const tdm_comm_init_info* info, tdm_comm** out) {
  const tdm_status s = g_mpi->comm_create(info, out);
  if (s == TDM_OK && TDM_STRUCT_HAS(info, tdm_comm_init_info, point_to_point) && info->point_to_point != 0) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_told.insert(*out);
  }
  return s;
}

void comm_destroy(tdm_comm* comm) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_told.erase(comm);
  }
  g_mpi->comm_destroy(comm);
}

bool told(tdm_comm* comm, const char* call) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_told.count(comm) != 0) return true;
  g_host->set_error(g_host->ctx, TDM_UNSUPPORTED,
                    "mpi_told: %s on a communicator created without point_to_point", call);
  return false;
}

tdm_status send_start(tdm_comm* comm, const void* buffer, size_t count, tdm_dtype dtype, int32_t peer,
                      void* stream, tdm_comm_request** out) {
  if (!told(comm, "send_start")) return TDM_UNSUPPORTED;
  return g_mpi->send_start(comm, buffer, count, dtype, peer, stream, out);
}

tdm_status recv_start(tdm_comm* comm, void* buffer, size_t count, tdm_dtype dtype, int32_t peer, void* stream,
                      tdm_comm_request** out) {
  if (!told(comm, "recv_start")) return TDM_UNSUPPORTED;
  return g_mpi->recv_start(comm, buffer, count, dtype, peer, stream, out);
}

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  const tdm_plugin* mpi_plugin = load_wrapped_plugin(TANDEM_MPI_PLUGIN_PATH, "mpi_told", host, major, minor);
  if (mpi_plugin == nullptr || mpi_plugin->comm == nullptr) return nullptr;  // its error is set
  g_host = host;
  g_mpi = mpi_plugin->comm;
  static tdm_comm_api strict;
  strict = *mpi_plugin->comm;
  strict.comm_create = comm_create;
  strict.comm_destroy = comm_destroy;
  strict.send = nullptr;  // only the started transfers, as nccl
  strict.recv = nullptr;
  strict.send_start = send_start;
  strict.recv_start = recv_start;
  static tdm_plugin plugin;
  plugin = *mpi_plugin;
  plugin.name = "mpi_told";
  plugin.comm = &strict;
  return &plugin;
}
