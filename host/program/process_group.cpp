#include "program/process_group.hpp"

#include <algorithm>
#include <cstdlib>

namespace tandem::host::program {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != nullptr && *end == '\0' ? static_cast<int>(n) : fallback;
}

}  // namespace

ProcessGroup detect_process_group() {
  struct Source {
    const char *rank, *world, *local, *local_world, *name;
  };
  const Source sources[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE", "mpirun"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "mpirun"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "slurm"},
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "env"},
  };
  for (const Source& s : sources) {
    const int world = env_int(s.world, 0);
    if (world < 1) continue;
    return ProcessGroup{env_int(s.rank, 0), world, env_int(s.local, 0),
                        std::max(0, env_int(s.local_world, 0)), s.name};
  }
  return {};
}

}  // namespace tandem::host::program
