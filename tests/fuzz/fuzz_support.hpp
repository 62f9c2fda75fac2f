// What the fuzzers share: a scratch file for readers that only take a path,
// and a check of a reader's own promises that ends the run like a crash.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tandem::fuzz {

// One file per process, rewritten for every input: creating a file per
// input would cost more than most readers take to run. In /dev/shm where
// there is one: rewriting a truncated file on ext4 (/tmp here) made the IDX
// fuzzer ten times slower. Removed at exit (libFuzzer returns from main
// normally unless it found something).
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& name) {
    const auto file = "tandem-fuzz-" + std::to_string(::getpid()) + "-" + name;
    std::error_code ec;
    const bool shm = std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0;
    path_ =
        ((shm ? std::filesystem::path("/dev/shm") : std::filesystem::temp_directory_path()) / file).string();
  }
  ~ScratchFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& write(const uint8_t* data, size_t size) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return path_;
  }

 private:
  std::string path_;
};

// A result that its header says cannot happen (a data set whose feature
// count does not match its labels, an error that does not name its file)
// is a bug like a crash: abort so libFuzzer keeps the input.
inline void expect(bool ok, const char* promise) {
  if (ok) return;
  std::fprintf(stderr, "reader broke its promise: %s\n", promise);
  std::abort();
}

}  // namespace tandem::fuzz
