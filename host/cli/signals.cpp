#include "cli/signals.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "util/logger.hpp"

namespace tandem::cli {
namespace {

std::atomic<SignalRequests*> g_armed{nullptr};

sigset_t watched() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&set, s);
  return set;
}

// A child process (an MPI launcher's helper, a shell) starts as a program
// would without Tandem around it.
void unblock_in_child() {
  const sigset_t set = watched();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void say(const std::string& text) {
  // One write(2) of a whole line: it cannot interleave within the line.
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
}

// The signal's default action, on this thread: the only one where it is
// unblocked, so the kernel delivers it here and the process ends with it.
[[noreturn]] void end_with(int sig) {
  ::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);  // not reached: the default action of every watched stop signal ends the process
}

void watch() {
  const sigset_t set = watched();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    SignalRequests* armed = g_armed.load();
    if (sig == SIGUSR1) {
      if (armed != nullptr) armed->status.store(true);
      continue;
    }
    if (armed != nullptr && !armed->stop.exchange(true)) {
      armed->stop_signal.store(sig);
      say(host::Logger::global().prefix() +
          "stopping after this step to save a checkpoint (the same signal again stops at once, "
          "without saving)\n");
      continue;
    }
    end_with(sig);
  }
}

}  // namespace

void start_signal_thread() {
  const sigset_t set = watched();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  pthread_atfork(nullptr, nullptr, unblock_in_child);
  std::thread(watch).detach();
}

void arm_signals(SignalRequests* requests) {
  g_armed.store(requests);
}

}  // namespace tandem::cli
