// Tandem conformance kit — a backend plugin opened for testing.
//
// The kit's own small loader, with the host's checks (tandem/plugin_check.hpp,
// one implementation for both): file permissions and ELF headers, then
// dlopen(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) — a plugin is never unloaded
// (sdk/ABI.md rule 12) — resolve tdm_plugin_entry, check the descriptor and
// the backend table's required functions, init once, open a device and
// create a stream. A C++ exception escaping any of these calls is a failure
// naming the function, never a crash of the kit. Opening the same file twice shares one
// initialised library (the reference run against itself does that): the
// first opener's configuration is the one init sees.
//
// Tests of one backend use it too (with run_op.hpp), so every test that
// loads a plugin and runs an op goes through this one host.
#ifndef TANDEM_CONFORMANCE_PLUGIN_UNDER_TEST_HPP
#define TANDEM_CONFORMANCE_PLUGIN_UNDER_TEST_HPP

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tandem/conformance/outcome.hpp"
#include "tandem/plugin_check.hpp"
#include "tandem/tandem.h"

namespace tandem::conformance {

// Log lines from plugins are printed (stderr) only when verbose.
void set_verbose(bool verbose) noexcept;
bool verbose() noexcept;

// The last message a plugin gave through set_error on this thread ("" if
// none), and a way to clear it before a call.
const std::string& last_plugin_error() noexcept;
void clear_plugin_error() noexcept;

// Calls `fn`, a call into the plugin returning a tdm_status or void
// (plugin_check::call_catching). A C++ exception escaping it (sdk/ABI.md
// rule 14 forbids that) becomes TDM_INTERNAL, with last_plugin_error()
// naming the function and the exception: a failure of the case, never a
// crash of the kit.
void record_plugin_error(std::string message);
template <class Fn>
tdm_status call_plugin(const char* function, Fn&& fn) noexcept {
  std::string escaped;
  const tdm_status status = plugin_check::call_catching(function, escaped, std::forward<Fn>(fn));
  if (!escaped.empty()) record_plugin_error(std::move(escaped));
  return status;
}

struct LoadedLibrary;  // one per plugin file; shared, never unloaded

struct OpenOptions {
  // What the host's config_get answers ("threads" -> "1"); every other key
  // is TDM_NOT_FOUND.
  std::vector<std::pair<std::string, std::string>> config;
  // Load a file (or directory) that group or others may write, as the
  // host's --allow-insecure-plugins does; refused otherwise, as by the host.
  bool allow_insecure = false;
  // The plugin directories of the installed host (or build tree): a plugin
  // elsewhere named like one of theirs (by file or descriptor) is refused
  // as the host refuses it, unless its name is in `override_plugins` (the
  // host's --override-plugin). Empty: no such check.
  std::vector<std::filesystem::path> system_dirs;
  std::vector<std::string> override_plugins;
  // Accept a comm plugin too (load only: api() is then unusable and
  // comm_api() its table); otherwise only a backend loads.
  bool accept_comm = false;
};

class PluginUnderTest {
 public:
  // Opens `path` and its device 0. On failure the outcome says why:
  // Status::skipped when the device is unavailable (with the plugin's
  // reason), Status::error otherwise.
  static std::unique_ptr<PluginUnderTest> open(const std::string& path, Outcome& outcome,
                                               const OpenOptions& options = {});
  // Loads and initialises the plugin without opening a device (descriptor()
  // and api() are usable; device() and stream() are null until
  // open_device). nullptr and a Status::error outcome when it cannot.
  static std::unique_ptr<PluginUnderTest> load(const std::string& path, Outcome& outcome,
                                               const OpenOptions& options = {});
  // Opens device `index` and a stream on it: Status::skipped with the
  // plugin's reason when there is no such usable device.
  Outcome open_device(uint32_t index = 0);
  ~PluginUnderTest();
  PluginUnderTest(const PluginUnderTest&) = delete;
  PluginUnderTest& operator=(const PluginUnderTest&) = delete;

  const std::string& path() const noexcept { return path_; }
  const tdm_plugin& descriptor() const noexcept;
  std::string name() const;         // the plugin's self-reported name
  std::string description() const;  // "name version (sdk X): description"
  const tdm_backend_api& api() const noexcept { return *api_; }
  // A comm plugin's table (OpenOptions::accept_comm), else nullptr.
  const tdm_comm_api* comm_api() const noexcept;
  tdm_device* device() const noexcept { return device_; }
  tdm_stream* stream() const noexcept { return stream_; }
  std::string device_name() const;

 private:
  PluginUnderTest() = default;
  std::string path_;
  std::shared_ptr<LoadedLibrary> library_;
  const tdm_backend_api* api_ = nullptr;
  tdm_device* device_ = nullptr;
  tdm_stream* stream_ = nullptr;
};

}  // namespace tandem::conformance

#endif
