#include "program/process_group.hpp"

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
    const char *rank, *world, *local, *name;
  };
  const Source sources[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "mpirun"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm"},
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "env"},
  };
  for (const Source& s : sources) {
    const int world = env_int(s.world, 0);
    if (world < 1) continue;
    return ProcessGroup{env_int(s.rank, 0), world, env_int(s.local, 0), s.name};
  }
  return {};
}

}  // namespace tandem::host::program
