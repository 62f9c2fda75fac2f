// Asynchronous signals — Ctrl-C (SIGINT), SIGTERM, SIGHUP and SIGUSR1 — are
// never handled by a signal handler. main() blocks them before any thread
// exists, so every thread (compute, loader, copy, OpenMP, MPI) inherits the
// mask, and one thread of their own waits for them with sigwait() and turns
// them into flags that the training loop reads between steps. No signal
// ever interrupts a compute thread, JIT code, the allocator or a system call
// (so no EINTR and no partial read or write anywhere), and no code that is
// not async-signal-safe can run in a handler, because there is none.
//
// Why: with a handler, a signal lands on whichever thread the kernel picks.
// On AVX2 CPUs, with the CUDA libraries loaded beside oneDNN, a no-op
// SIGUSR1 handler firing every 20 ms during `tandem train` corrupted the
// heap inside oneDNN's OpenMP threads (`corrupted size vs. prev_size`,
// abort) within a few signals, in every run; with the signals kept off the
// compute threads the same runs finish (tests/train/signals_test.cpp).
//
// While a training run has armed its requests:
//   SIGINT, SIGTERM, SIGHUP  stop after the current step and save a
//                            checkpoint (exit 128 + the signal); the same
//                            signal again ends the process at once.
//   SIGUSR1                  print the progress line now (as dd does); it
//                            never stops anything, armed or not.
// Unarmed (any other command, or before training starts), the stop signals
// end the process as they would without Tandem. Child processes start with
// the signals unblocked.
#pragma once

#include <atomic>

namespace tandem::cli {

struct SignalRequests {
  std::atomic<bool> stop{false};  // SIGINT, SIGTERM or SIGHUP arrived
  std::atomic<int> stop_signal{0};
  std::atomic<bool> status{false};  // SIGUSR1 arrived: print the progress line
};

// First thing in main, before any other thread exists.
void start_signal_thread();

// Routes the signals to `requests` (nullptr: back to the default actions).
void arm_signals(SignalRequests* requests);

}  // namespace tandem::cli
