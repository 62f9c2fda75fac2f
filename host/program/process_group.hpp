// This process's place among the processes of a run, as a launcher started
// them: mpirun, Slurm, or anything that sets RANK/WORLD_SIZE/LOCAL_RANK.
#pragma once

#include <string>

namespace tandem::host::program {

struct ProcessGroup {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string launcher;  // "mpirun", "slurm", "env" or "" (single process)
};

// Reads the launcher's environment: Open MPI (OMPI_COMM_WORLD_*), PMI,
// Slurm (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID), then RANK/WORLD_SIZE/LOCAL_RANK.
ProcessGroup detect_process_group();

}  // namespace tandem::host::program
