// Exit codes of the `tandem` program, as documented in `tandem --help`.
// Scripts rely on them: never renumber, only append.
#pragma once

namespace tandem::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitRuntimeFailure = 1,  // something failed while running (a kernel, a device, I/O)
  kExitUsage = 2,           // unknown command or option, bad option value
  kExitPlugin = 3,          // plugin error, e.g. no backend plugin could be loaded
  kExitInput = 4,           // input, data or model file error
  kExitInterrupted = 130,   // stopped by Ctrl-C after saving a checkpoint (the shell's 128 + SIGINT);
                            // SIGHUP and SIGTERM give 129 and 143 the same way
};

inline constexpr const char* kExitCodeHelp =
    "Exit codes:\n"
    "  0  success\n"
    "  1  runtime failure\n"
    "  2  usage error (unknown command or option, bad value)\n"
    "  3  plugin error (e.g. no backend plugin could be loaded)\n"
    "  4  input, data or model file error\n"
    "  130  interrupted by Ctrl-C (train saved a checkpoint first); 129 and 143 likewise for SIGHUP and\n"
    "       SIGTERM. SIGUSR1 makes train print its progress line and go on.\n";

}  // namespace tandem::cli
