#include "train/run_directory.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/format.hpp"
#include "util/logger.hpp"

namespace tandem::host::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kLockName = ".tandem-lock";

std::string errno_text(int error) {
  return std::strerror(error);
}

// What the holder wrote into the lock file: "pid <n>\ncommand <...>\nstarted <...>".
std::string holder_of(int fd) {
  char text[1024] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::istringstream lines(std::string(text, n > 0 ? static_cast<size_t>(n) : 0));
  std::string pid, command, started;
  for (std::string line; std::getline(lines, line);) {
    const auto space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string key = line.substr(0, space), value = line.substr(space + 1);
    if (key == "pid") pid = value;
    if (key == "command") command = value;
    if (key == "started") started = value;
  }
  if (pid.empty()) return "another process";
  return "process " + pid + (command.empty() ? "" : " (" + command + ")") +
         (started.empty() ? "" : ", started " + started);
}

std::string own_command() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : raw)
    if (c == '\0') c = ' ';
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw.size() > 300 ? raw.substr(0, 300) + "..." : raw;
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&t, &local);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

void write_holder(int fd) {
  const std::string text =
      "pid " + std::to_string(::getpid()) + "\ncommand " + own_command() + "\nstarted " + now_text() + "\n";
  if (::ftruncate(fd, 0) != 0) return;  // only informative: the lock itself is the flock
  if (::pwrite(fd, text.data(), text.size(), 0) < 0) return;
}

// ".<file>.tmp-<pid>", as checkpoint/atomic_file.cpp names its temporaries.
bool is_temporary(const std::string& name, pid_t& writer) {
  const auto mark = name.rfind(".tmp-");
  if (name.empty() || name[0] != '.' || mark == std::string::npos || mark + 5 >= name.size()) return false;
  const std::string digits = name.substr(mark + 5);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return false;
  writer = static_cast<pid_t>(std::stol(digits));
  return true;
}

}  // namespace

Result<RunDirectory> RunDirectory::acquire(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path))
    return make_error("--run-dir " + path + ": cannot create the run directory (" +
                          (ec ? ec.message() : std::string("a file of that name exists")) +
                          "); choose another --run-dir",
                      TDM_INVALID_ARGUMENT);
  const std::string lock_path = (fs::path(path) / kLockName).string();
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error("--run-dir " + path + ": cannot write in the run directory (" + errno_text(errno) +
                          "); make it writable or choose another --run-dir",
                      TDM_INVALID_ARGUMENT);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = error == EWOULDBLOCK ? holder_of(fd) : "";
    ::close(fd);
    if (error == EWOULDBLOCK)
      return make_error("--run-dir " + path + " is in use by " + holder +
                            ": two runs in one directory would mix their metrics.jsonl and checkpoints; wait "
                            "for it to finish (or stop it: a stopped run saves a checkpoint, and --resume " +
                            path + " continues it), or choose another --run-dir",
                        TDM_UNAVAILABLE);
    return make_error("--run-dir " + path + ": cannot lock " + lock_path + " (" + errno_text(error) + ")",
                      TDM_INVALID_ARGUMENT);
  }
  write_holder(fd);
  RunDirectory run(path, fd);
  // Held: no other run writes here, so every temporary left is a dead writer's.
  uint64_t stale = remove_stale_temporaries(path);
  stale += remove_stale_temporaries((fs::path(path) / "checkpoints").string());
  if (stale > 0)
    log_warning("removed " + human_bytes(stale) + " of temporary files that an interrupted run left in " +
                path);
  return run;
}

RunDirectory::RunDirectory(RunDirectory&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

RunDirectory& RunDirectory::operator=(RunDirectory&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

RunDirectory::~RunDirectory() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

uint64_t remove_stale_temporaries(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    pid_t writer = 0;
    if (!entry.is_regular_file(ec) || !is_temporary(entry.path().filename().string(), writer)) continue;
    // A live writer other than this process keeps its file (a run that
    // does not hold the lock, such as an older Tandem, may still write).
    if (writer != ::getpid() && (::kill(writer, 0) == 0 || errno == EPERM)) continue;
    const uint64_t size = entry.file_size(ec);
    if (fs::remove(entry.path(), ec)) bytes += ec ? 0 : size;
  }
  return bytes;
}

Result<void> check_writable_file(const std::string& path, const std::string& option) {
  const fs::path file(path);
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::error_code ec;
  if (fs::is_directory(file, ec))
    return make_error(option + " " + path + ": is a directory; give a file name", TDM_INVALID_ARGUMENT);
  if (!fs::is_directory(dir, ec))
    return make_error(option + " " + path + ": the directory " + dir.string() +
                          " does not exist; create it or give another path",
                      TDM_INVALID_ARGUMENT);
  const bool existed = fs::exists(file, ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error(option + " " + path + ": cannot be written (" + errno_text(errno) +
                          "); the run would only find out at its end: give a writable path",
                      TDM_INVALID_ARGUMENT);
  ::close(fd);
  if (!existed) fs::remove(file, ec);
  return {};
}

}  // namespace tandem::host::train
