#include "checkpoint/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tandem::host::checkpoint {
namespace {

std::string errno_text() {
  return std::strerror(errno);
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

Result<void> write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // Built with append(): g++ 12 at -O3 warns falsely (-Wrestrict) on the
  // equivalent chain of operator+.
  std::string temp_name(".");
  temp_name.append(target.filename().string()).append(".tmp-").append(std::to_string(::getpid()));
  const std::string temp = (dir / temp_name).string();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error(
        path + ": cannot create a temporary file in " + dir.string() + " (" + errno_text() + ")",
        TDM_INVALID_ARGUMENT);
  bool ok = true;
  for (std::string_view part : parts) ok = ok && write_all(fd, part);
  std::string why = ok ? "" : "write failed (" + errno_text() + ")";
  if (ok && ::fsync(fd) != 0) {
    ok = false;
    why = "fsync failed (" + errno_text() + ")";
  }
  if (::close(fd) != 0 && ok) {
    ok = false;
    why = "close failed (" + errno_text() + ")";
  }
  if (ok && ::rename(temp.c_str(), path.c_str()) != 0) {
    ok = false;
    why = "rename failed (" + errno_text() + ")";
  }
  if (!ok) {
    ::unlink(temp.c_str());
    return make_error(path + ": " + why + "; the previous file, if any, is unchanged", TDM_INVALID_ARGUMENT);
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace tandem::host::checkpoint
