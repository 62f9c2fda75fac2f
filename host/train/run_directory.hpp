// A run directory held by one training run for its whole life: an advisory
// lock (flock) on <run-dir>/.tandem-lock, which the kernel releases on any
// exit, kill -9 included. A second run on the same directory is refused
// naming the process that holds it, instead of both writing metrics.jsonl
// and checkpoints. Taking the lock also proves the directory writable
// before any training, and clears the temporary files writers killed
// mid-write left behind (checkpoint/atomic_file.hpp names them
// .<file>.tmp-<pid>).
#pragma once

#include <string>

#include "util/result.hpp"

namespace tandem::host::train {

class RunDirectory {
 public:
  // Creates `path` if needed and locks it; an error names the directory,
  // the process holding it (pid, command, start) or what stops writing there.
  static Result<RunDirectory> acquire(const std::string& path);

  RunDirectory(RunDirectory&& other) noexcept;
  RunDirectory& operator=(RunDirectory&& other) noexcept;
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;
  ~RunDirectory();

  const std::string& path() const { return path_; }

 private:
  RunDirectory(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  std::string path_;
  int fd_ = -1;
};

// An error naming `path` and `option` when a file cannot be written there
// (its directory missing or read-only, the file itself read-only or a
// directory). Leaves no file behind that was not there before.
Result<void> check_writable_file(const std::string& path, const std::string& option);

// Removes the temporary files of writers that died mid-write in `dir` (not
// recursive); returns how many bytes they held.
uint64_t remove_stale_temporaries(const std::string& dir);

}  // namespace tandem::host::train
