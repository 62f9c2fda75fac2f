// Run by mpiexec with 2 ranks (test train.RendezvousThroughMpi): rank 0's
// bytes reach rank 1 through the mpi plugin, as NCCL's id does before a GPU
// communicator exists. Exit 0 when every rank holds rank 0's bytes.
#include <cstdio>
#include <filesystem>
#include <vector>

#include "plugin/host_services.hpp"
#include "plugin/registry.hpp"
#include "train/distributed.hpp"
#include "train/rendezvous.hpp"

int main() {
  using namespace tandem::host;
  const train::ProcessGroup group = program::detect_process_group();
  if (group.world != 2) {
    std::fprintf(stderr, "run me with mpiexec -np 2 (world is %d)\n", group.world);
    return 2;
  }
  HostServices services;
  DiscoveryOptions options;
  options.plugin_paths = {TANDEM_BUILD_PLUGIN_DIR};
  options.env_path = "";
  options.install_dir = std::filesystem::path();
  options.exe_relative_dir = std::filesystem::path();
  options.allow_insecure = true;
  PluginRegistry registry = PluginRegistry::discover(options, services);
  const std::vector<unsigned char> sent = {7, 0, 255, 42, 1, 2, 3, 128};  // NCCL ids have zero bytes too
  std::vector<unsigned char> bytes = group.rank == 0 ? sent : std::vector<unsigned char>{};
  auto r = train::rendezvous("mpi", registry, group, bytes, 30);
  if (!r) {
    std::fprintf(stderr, "rank %d: %s\n", group.rank, r.error().message.c_str());
    return 1;
  }
  if (bytes != sent) {
    std::fprintf(stderr, "rank %d received %zu bytes, not rank 0's %zu\n", group.rank, bytes.size(),
                 sent.size());
    return 1;
  }
  std::printf("rank %d holds rank 0's %zu bytes\n", group.rank, bytes.size());
  return 0;
}
