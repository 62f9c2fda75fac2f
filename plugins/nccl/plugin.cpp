// NCCL comm plugin — the entry point (the one exported symbol), rank 0's
// rendezvous id, and the versions shown by `tandem plugins`.
#include <cstring>

#include "comm.hpp"
#include "nccl_types.hpp"

namespace {

tandem::PluginInfo info() {
  tandem::PluginInfo i{
      "nccl", "0.1.0", "Collectives between NVIDIA GPUs over NCCL (NVLink, InfiniBand, sockets)", {}};
  // NCCL is opened when a communicator is created (nccl_library.hpp): the
  // version it was built against, whose soname it opens. The runtime is
  // linked statically; asking its version needs no driver.
  i.vendors.emplace_back("NCCL", std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
                                     std::to_string(NCCL_PATCH));
  int runtime = 0;
  i.vendors.emplace_back("CUDA runtime",
                         cudaRuntimeGetVersion(&runtime) == cudaSuccess
                             ? std::to_string(runtime / 1000) + "." + std::to_string((runtime % 1000) / 10)
                             : "unknown");
  return i;
}

// Rank 0 calls this; the host hands the bytes to every rank's comm_create.
tdm_status unique_id(void* buffer, size_t* bytes) {
  return tandem::guard([&] {
    if (bytes == nullptr) throw tandem::Error(TDM_INVALID_ARGUMENT, "nccl: comm_unique_id: bytes is NULL");
    const size_t capacity = *bytes;
    *bytes = sizeof(ncclUniqueId);
    if (buffer == nullptr || capacity < sizeof(ncclUniqueId))
      throw tandem::Error(TDM_INVALID_ARGUMENT, "nccl: comm_unique_id needs a buffer of " +
                                                    std::to_string(sizeof(ncclUniqueId)) + " bytes, got " +
                                                    std::to_string(capacity));
    ncclUniqueId id;
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess)
      throw tandem::Error(TDM_UNAVAILABLE, std::string("nccl: ncclGetUniqueId failed: ") +
                                               ncclGetErrorString(rc) + " (" + ncclGetLastError(nullptr) +
                                               ")");
    std::memcpy(buffer, &id, sizeof id);
  });
}

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  try {
    return tandem::comm_entry<tandem::nccl::NcclComm>(host, major, minor, info(), &unique_id);
  } catch (...) {  // info() allocates; nothing may escape a C entry point
    return nullptr;
  }
}
