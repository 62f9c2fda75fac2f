// Helpers for the loader tests: a scratch directory under the build tree
// and copies of the purpose-built plugins with chosen permissions.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plugin/registry.hpp"

namespace tandem::test {

namespace fs = std::filesystem;

inline fs::path built_plugin(const std::string& dir, const std::string& name) {
  return fs::path(TEST_PLUGIN_ROOT) / dir / ("libtandem-" + name + ".so");
}

// A fresh directory, removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::path(TEST_TMP_ROOT) /
            (std::string(info->test_suite_name()) + "." + info->name() + "." + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
    chmod(path_, 0755);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

  // A subdirectory with mode 0755 (the umask may differ).
  fs::path dir(const std::string& name) const {
    fs::path d = path_ / name;
    fs::create_directories(d);
    chmod(d, 0755);
    return d;
  }
  // Copies a built plugin into `dir` as `file_name`, mode 0755.
  static fs::path copy(const fs::path& from, const fs::path& dir, const std::string& file_name) {
    fs::path to = dir / file_name;
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
    chmod(to, 0755);
    return to;
  }
  static void chmod(const fs::path& p, unsigned mode) { ::chmod(p.c_str(), static_cast<mode_t>(mode)); }

 private:
  fs::path path_;
};

// Discovery restricted to what a test names: no environment, no install or
// build-tree directory unless given.
inline host::DiscoveryOptions isolated_options() {
  host::DiscoveryOptions o;
  o.env_path = "";
  o.install_dir = fs::path();
  o.exe_relative_dir = fs::path();
  return o;
}

// A registry holding one copy of a built test plugin, with the given
// configuration entries.
struct Loaded {
  ScratchDir scratch;
  host::HostServices services;
  std::optional<host::PluginRegistry> registry;

  Loaded(const std::string& dir, const std::string& name,
         std::vector<std::pair<std::string, std::string>> config = {}) {
    for (const auto& [k, v] : config) services.config().set(k, v);
    fs::path d = scratch.dir(dir);
    ScratchDir::copy(built_plugin(dir, name), d, "libtandem-" + name + ".so");
    host::DiscoveryOptions options = isolated_options();
    options.plugin_paths = {d.string()};
    registry.emplace(host::PluginRegistry::discover(options, services));
  }
};

}  // namespace tandem::test
