// The permission check of rule 11: a plugin runs with the user's rights, so
// a file or directory writable by group or others is a way for someone else
// to run code as this user.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tandem/plugin_check.hpp"

namespace fs = std::filesystem;

namespace tandem::plugin_check {
namespace {

std::string octal_mode(unsigned mode) {
  char text[16];
  std::snprintf(text, sizeof text, "%04o", mode & 07777u);
  return text;
}

Verdict check_one(const fs::path& file, const fs::path& path, const std::string& allow_option) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Refusal{"cannot load plugin " + file.string() + ": " + path.string() + ": " + std::strerror(errno),
                   TDM_NOT_FOUND};
  const bool group = (st.st_mode & S_IWGRP) != 0;
  const bool others = (st.st_mode & S_IWOTH) != 0;
  if (!group && !others) return std::nullopt;
  const char* who = group && others ? "group and others" : (group ? "its group" : "others");
  return Refusal{"refusing plugin " + file.string() + ": " + path.string() + " is writable by " + who +
                     " (mode " + octal_mode(st.st_mode) +
                     "), so another user could replace the code Tandem runs. Fix it with 'chmod go-w " +
                     path.string() + "', or pass " + allow_option +
                     " if you trust everyone who can write there",
                 TDM_INVALID_ARGUMENT};
}

}  // namespace

Verdict check_not_writable_by_others(const fs::path& file, const std::string& allow_option) {
  if (Verdict r = check_one(file, file, allow_option)) return r;
  fs::path dir = file.parent_path();
  if (dir.empty()) dir = ".";
  return check_one(file, dir, allow_option);
}

}  // namespace tandem::plugin_check
