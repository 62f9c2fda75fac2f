// Tandem conformance kit — a backend plugin opened for testing.
//
// The kit's own tiny loader (the host's loader is not part of the SDK):
// dlopen(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) — a plugin is never unloaded
// (ABI.md rule 9) — resolve tdm_plugin_entry, check the ABI major, init once,
// open device 0 and create a stream. Opening the same file twice shares one
// initialised library (the reference run against itself does that).
#ifndef TANDEM_CONFORMANCE_PLUGIN_UNDER_TEST_HPP
#define TANDEM_CONFORMANCE_PLUGIN_UNDER_TEST_HPP

#include <memory>
#include <string>

#include "tandem/conformance/outcome.hpp"
#include "tandem/tandem.h"

namespace tandem::conformance {

// Log lines from plugins are printed (stderr) only when verbose.
void set_verbose(bool verbose) noexcept;
bool verbose() noexcept;

// The last message a plugin gave through set_error on this thread ("" if
// none), and a way to clear it before a call.
const std::string& last_plugin_error() noexcept;
void clear_plugin_error() noexcept;

struct LoadedLibrary;  // one per plugin file; shared, never unloaded

class PluginUnderTest {
 public:
  // Opens `path`. On failure the outcome says why: Status::skipped when the
  // device is unavailable (with the plugin's reason), Status::error otherwise.
  static std::unique_ptr<PluginUnderTest> open(const std::string& path, Outcome& outcome);
  ~PluginUnderTest();
  PluginUnderTest(const PluginUnderTest&) = delete;
  PluginUnderTest& operator=(const PluginUnderTest&) = delete;

  const std::string& path() const noexcept { return path_; }
  std::string name() const;         // the plugin's self-reported name
  std::string description() const;  // "name version (sdk X): description"
  const tdm_backend_api& api() const noexcept { return *api_; }
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
