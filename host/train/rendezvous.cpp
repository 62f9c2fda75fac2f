#include "train/rendezvous.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>
#include <thread>

#include "checkpoint/atomic_file.hpp"
#include "util/last_error.hpp"

namespace tandem::host::train {
namespace {

Result<void> through_file(const std::string& path, const ProcessGroup& group,
                          std::vector<unsigned char>& bytes, double timeout_seconds) {
  namespace fs = std::filesystem;
  if (group.rank == 0) {
    std::error_code ec;
    if (fs::exists(path, ec))
      return make_error(
          "rendezvous file " + path +
              " already exists (from an earlier job?); delete it or pass a new --rendezvous path",
          TDM_INVALID_ARGUMENT);
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return checkpoint::write_file_atomically(path, {text});
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      return {};
    }
    if (std::chrono::steady_clock::now() > deadline)
      return make_error("rank " + std::to_string(group.rank) + " waited " + std::to_string(timeout_seconds) +
                            " s for rank 0 to write the rendezvous file " + path +
                            ": is rank 0 running, and is the path on a file system every rank sees?",
                        TDM_TIMEOUT);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Result<void> through_mpi(const PluginRegistry& registry, const ProcessGroup& group,
                         std::vector<unsigned char>& bytes, double timeout_seconds,
                         std::optional<int32_t> part) {
  const LoadedPlugin* mpi = registry.find("mpi");
  if (mpi == nullptr || mpi->comm == nullptr)
    return make_error(
        "the GPU communicator's rendezvous goes through MPI, but the mpi plugin is not loaded: install "
        "tandem-plugin-mpi, or pass --rendezvous file:///shared/path",
        TDM_NOT_FOUND);
  tdm_comm_init_info init = comm_init_info(group, timeout_seconds);
  if (part) init.group = *part;  // the mpi plugin splits its world by it (ABI 1.10)
  tdm_comm* comm = nullptr;
  if (mpi->comm->comm_create(&init, &comm) != TDM_OK || comm == nullptr)
    return make_error("rendezvous through MPI: " + last_error_text("the mpi plugin gave no reason"),
                      TDM_UNAVAILABLE);
  int64_t size = static_cast<int64_t>(bytes.size());
  tdm_status s = mpi->comm->broadcast(comm, &size, 1, TDM_S64, 0, nullptr);
  if (s == TDM_OK) {
    bytes.resize(static_cast<size_t>(size));
    s = mpi->comm->broadcast(comm, bytes.data(), bytes.size(), TDM_U8, 0, nullptr);
  }
  const std::string reason = s == TDM_OK ? "" : last_error_text("the mpi plugin gave no reason");
  mpi->comm->comm_destroy(comm);
  if (s != TDM_OK) return make_error("rendezvous through MPI: " + reason, s);
  return {};
}

}  // namespace

Result<void> rendezvous(const std::string& how, const PluginRegistry& registry, const ProcessGroup& group,
                        std::vector<unsigned char>& bytes, double timeout_seconds,
                        std::optional<int32_t> part) {
  const std::string file_scheme = "file://";
  if (how.rfind(file_scheme, 0) == 0) {
    const std::string path = how.substr(file_scheme.size());
    return through_file(part ? path + ".group-" + std::to_string(*part) : path, group, bytes,
                        timeout_seconds);
  }
  if (how == "mpi" || how.empty()) return through_mpi(registry, group, bytes, timeout_seconds, part);
  return make_error("--rendezvous " + how + ": expected 'mpi' or file:///path/on/a/shared/file/system",
                    TDM_INVALID_ARGUMENT);
}

}  // namespace tandem::host::train
