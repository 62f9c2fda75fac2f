#include "plugin/file_security.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "util/format.hpp"

namespace fs = std::filesystem;

namespace tandem::host {
namespace {

Result<void> check_one(const fs::path& file, const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(
        "cannot check plugin " + file.string() + ": stat " + path.string() + ": " + std::strerror(errno),
        TDM_NOT_FOUND);
  const bool group = (st.st_mode & S_IWGRP) != 0;
  const bool others = (st.st_mode & S_IWOTH) != 0;
  if (!group && !others) return {};
  const char* who = group && others ? "group and others" : (group ? "its group" : "others");
  return make_error("refusing plugin " + file.string() + ": " + path.string() + " is writable by " + who +
                        " (mode " + octal_mode(st.st_mode) +
                        "), so another user could replace the code Tandem runs. Fix it with 'chmod go-w " +
                        path.string() +
                        "', or pass --allow-insecure-plugins if you trust everyone who can write there",
                    TDM_INVALID_ARGUMENT);
}

}  // namespace

Result<void> check_not_writable_by_others(const fs::path& file) {
  Result<void> r = check_one(file, file);
  if (!r) return r;
  fs::path dir = file.parent_path();
  if (dir.empty()) dir = ".";
  return check_one(file, dir);
}

}  // namespace tandem::host
