// This process's place among the processes of a run, as a launcher started
// them: mpirun, Slurm, or anything that sets RANK/WORLD_SIZE/LOCAL_RANK.
#pragma once

#include <string>

namespace tandem::host::program {

struct ProcessGroup {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 0;   // the processes on this node; 0 when the launcher does not say
  std::string launcher;  // "mpirun", "slurm", "env" or "" (single process)
};

// Reads the launcher's environment: Open MPI (OMPI_COMM_WORLD_*), PMI,
// Slurm (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID), then RANK/WORLD_SIZE/
// LOCAL_RANK; the node's process count from OMPI_COMM_WORLD_LOCAL_SIZE,
// MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE or LOCAL_WORLD_SIZE.
ProcessGroup detect_process_group();

}  // namespace tandem::host::program
