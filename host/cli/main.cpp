// `tandem`: the command-line front end. All work happens in run_cli and the
// commands it dispatches to; only main turns the result into the exit code.
#include <cstdio>
#include <exception>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/signals.hpp"

int main(int argc, char** argv) {
  try {
    tandem::cli::start_signal_thread();  // before any other thread: see signals.hpp
    return tandem::cli::run_cli(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem: error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "tandem: error: unknown internal error\n");
  }
  return tandem::cli::kExitRuntimeFailure;
}
