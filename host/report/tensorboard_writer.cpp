#include "report/tensorboard_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>

namespace tandem::host::report {
namespace {

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    return make_error(dir + ": cannot create the directory (" + (ec ? ec.message() : "not a directory") + ")",
                      TDM_INVALID_ARGUMENT);
  const std::string base =
      (fs::path(dir) / ("events.out.tfevents." + std::to_string(std::time(nullptr)) + "." + host_name()))
          .string();
  std::string path = base;
  int fd = -1;
  for (int n = 2; n < 100; ++n) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) break;
    path = base + "." + std::to_string(n);
  }
  if (fd < 0)
    return make_error(path + ": cannot create the event file (" + std::strerror(errno) + ")",
                      TDM_INVALID_ARGUMENT);
  std::unique_ptr<TensorBoardWriter> writer(new TensorBoardWriter(path, fd));
  writer->write_record(file_version_event(wall_time()));
  if (auto why = writer->error()) return make_error(*why, TDM_INVALID_ARGUMENT);
  return writer;
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardWriter::write(int64_t step, const std::vector<Scalar>& scalars) {
  if (scalars.empty()) return;
  write_record(scalars_event(wall_time(), step, scalars));
}

void TensorBoardWriter::write_record(const std::string& event) {
  if (!failure_.empty()) return;
  errno = 0;
  if (!write_all(fd_, tfrecord(event)))
    failure_ =
        std::string("a write failed (") + (errno != 0 ? std::strerror(errno) : "no space written") + ")";
}

std::optional<std::string> TensorBoardWriter::error() const {
  if (failure_.empty()) return std::nullopt;
  return path_ + ": " + failure_;
}

}  // namespace tandem::host::report
