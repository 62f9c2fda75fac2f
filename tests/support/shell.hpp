// Running a command line from a test: its exit code and its output (stdout
// and stderr together), as a user at a terminal sees them.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tandem::test {

struct CliRun {
  int code = -1;  // -1: it could not start or did not exit normally
  std::string output;
};

inline CliRun shell(const std::string& command) {
  CliRun run;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace tandem::test
