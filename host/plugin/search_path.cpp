#include "plugin/search_path.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <system_error>

#include "util/format.hpp"

#if !defined(TANDEM_PLUGIN_INSTALL_DIR_ABS) || !defined(TANDEM_PLUGIN_INSTALL_DIR_REL)
#error "TANDEM_PLUGIN_INSTALL_DIR_ABS and _REL must be defined by the build (host/CMakeLists.txt)"
#endif

namespace fs = std::filesystem;

namespace tandem::host {
namespace {
constexpr std::string_view kPrefix = "libtandem-";
constexpr std::string_view kSuffix = ".so";
}  // namespace

fs::path default_install_dir() {
  return fs::path(TANDEM_PLUGIN_INSTALL_DIR_ABS);
}

namespace {

// <dir of the executable>/../<relative>, or empty when unknown.
fs::path beside_executable(const fs::path& relative) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty() || relative.empty()) return {};
  return (exe.parent_path() / ".." / relative).lexically_normal();
}

}  // namespace

fs::path default_exe_relative_dir() {
  return beside_executable(fs::path("lib") / "tandem" / "plugins");
}

fs::path default_relocated_install_dir() {
  return beside_executable(TANDEM_PLUGIN_INSTALL_DIR_REL);
}

std::vector<SearchDir> plugin_search_dirs(const DiscoveryOptions& options) {
  std::vector<SearchDir> dirs;
  for (const std::string& list : options.plugin_paths)
    for (const std::string& d : split_path_list(list)) dirs.push_back({d, "--plugin-path", ""});

  std::string env;
  if (options.env_path) {
    env = *options.env_path;
  } else if (const char* value = std::getenv("TANDEM_PLUGIN_PATH")) {
    env = value;
  }
  for (const std::string& d : split_path_list(env)) dirs.push_back({d, "TANDEM_PLUGIN_PATH", ""});

  fs::path install = options.install_dir ? *options.install_dir : default_install_dir();
  if (!install.empty()) dirs.push_back({install, "install directory", "", true});
  if (!options.exe_relative_dir)
    if (fs::path moved = default_relocated_install_dir();
        !moved.empty() && moved != default_exe_relative_dir())
      dirs.push_back({moved, "installation beside the program", "", true});
  fs::path build = options.exe_relative_dir ? *options.exe_relative_dir : default_exe_relative_dir();
  if (!build.empty()) dirs.push_back({build, "build tree", "", true});

  std::set<fs::path> seen;
  for (SearchDir& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d.path, ec)) {
      d.note = fs::exists(d.path, ec) ? "not a directory" : "does not exist";
      continue;
    }
    fs::path canonical = fs::weakly_canonical(d.path, ec);
    if (ec) canonical = d.path;
    if (!seen.insert(canonical).second) d.note = "already searched (same directory as an earlier entry)";
  }
  return dirs;
}

std::string plugin_name_from_file(const fs::path& file) {
  std::string name = file.filename().string();
  if (name.size() <= kPrefix.size() + kSuffix.size()) return {};
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return {};
  if (name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) return {};
  return name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
}

std::vector<fs::path> plugin_files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (plugin_name_from_file(it->path()).empty()) continue;
    std::error_code type_ec;
    if (fs::is_directory(it->path(), type_ec)) continue;
    files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace tandem::host
