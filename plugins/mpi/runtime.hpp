// MPI comm plugin — process-wide MPI state: who initialised MPI, the thread
// level granted, the 2-byte float datatypes and their user reduction ops.
#ifndef TANDEM_MPI_RUNTIME_HPP
#define TANDEM_MPI_RUNTIME_HPP

#include <mpi.h>

#include <chrono>
#include <mutex>
#include <string>

#include "tandem/tandem.hpp"

namespace tandem::mpi {

struct Runtime {
  bool ready = false;
  bool we_initialised = false;  // MPI_Finalize at shutdown only then
  bool timed_out = false;       // a collective timed out: never MPI_Finalize (it would wait for the dead)
  int thread_level = MPI_THREAD_SINGLE;
  // Held around every MPI call when MPI granted less than MPI_THREAD_MULTIPLE
  // (two communicators may be driven from two threads).
  std::mutex serial;
  MPI_Datatype f16 = MPI_DATATYPE_NULL;
  MPI_Datatype bf16 = MPI_DATATYPE_NULL;
  MPI_Op sum16 = MPI_OP_NULL, max16 = MPI_OP_NULL, min16 = MPI_OP_NULL;
};

Runtime& runtime();
// Initialises MPI if nobody has (MPI_Init_thread asking for
// MPI_THREAD_MULTIPLE) and creates the datatypes and ops. Idempotent.
void runtime_init();
void runtime_shutdown() noexcept;

// Locked (Runtime::serial) when MPI granted less than MPI_THREAD_MULTIPLE;
// unlocked otherwise. Hold it around each MPI call.
std::unique_lock<std::mutex> serial();
// Between two polls of a non-blocking call that has waited `waited`: spin
// while it is young, then sleep a little longer each time, so a rank
// waiting long for a peer does not hold a core.
void pause_between_polls(std::chrono::steady_clock::duration waited);

// MPI's text for an error code.
std::string mpi_error_text(int code);
// Throws Error(TDM_INTERNAL) naming `what` and MPI's reason unless rc == MPI_SUCCESS.
void check_mpi(int rc, const std::string& what);

// Library name and version found at run time: {"Open MPI", "4.1.4"}.
std::pair<std::string, std::string> library_version();

}  // namespace tandem::mpi

#endif
