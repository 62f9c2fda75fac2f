// The kit's loader: dlopen + entry + init, then a device and a stream.
#include "tandem/conformance/plugin_under_test.hpp"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "tandem/plugin_check.hpp"

namespace tandem::conformance {

const char* status_name(Status s) noexcept {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::unsupported:
      return "unsupported";
    case Status::skipped:
      return "skipped";
    case Status::error:
      return "error";
  }
  return "?";
}

namespace {

bool g_verbose = false;
thread_local std::string t_last_error;

// Host context handed to a plugin: its file, for log lines, and the
// configuration config_get answers.
struct HostContext {
  std::string path;
  std::vector<std::pair<std::string, std::string>> config;
};

void host_log(void* ctx, tdm_log_level level, const char* message) {
  if (!g_verbose || message == nullptr) return;
  static const char* const names[] = {"error", "warning", "info", "debug"};
  const char* lvl = (level >= 0 && level <= 3) ? names[level] : "log";
  std::fprintf(stderr, "[%s] %s: %s\n", static_cast<HostContext*>(ctx)->path.c_str(), lvl, message);
}

void host_set_error(void* /*ctx*/, tdm_status /*code*/, const char* format, ...) {
  if (format == nullptr) return;
  va_list args;
  va_start(args, format);
  char buffer[2048];
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  t_last_error = buffer;
}

// The host_api.h protocol: *size in = capacity, out = the length with NUL.
tdm_status host_config_get(void* ctx, const char* key, char* buffer, size_t* size) {
  if (ctx == nullptr || key == nullptr || size == nullptr) return TDM_NOT_FOUND;
  for (const auto& [name, value] : static_cast<HostContext*>(ctx)->config) {
    if (name != key) continue;
    const size_t needed = value.size() + 1;
    const size_t capacity = *size;
    *size = needed;
    if (buffer == nullptr || capacity < needed) return TDM_INVALID_ARGUMENT;
    std::memcpy(buffer, value.c_str(), needed);
    return TDM_OK;
  }
  return TDM_NOT_FOUND;
}

void* host_scratch_alloc(void*, size_t bytes, size_t alignment) {
  if (alignment < 64) alignment = 64;
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
}
void host_scratch_free(void*, void* p) {
  std::free(p);
}

tdm_status host_scalar_get(void*, tdm_run*, const char*, double*) {
  return TDM_NOT_FOUND;
}
tdm_status host_scalar_set(void*, tdm_run*, const char*, double) {
  return TDM_NOT_FOUND;
}

std::string message_or(const std::string& fallback) {
  return t_last_error.empty() ? fallback : t_last_error;
}

}  // namespace

void record_plugin_error(std::string message) {
  t_last_error = std::move(message);
}

void set_verbose(bool v) noexcept {
  g_verbose = v;
}
bool verbose() noexcept {
  return g_verbose;
}
const std::string& last_plugin_error() noexcept {
  return t_last_error;
}
void clear_plugin_error() noexcept {
  t_last_error.clear();
}

// One per dlopen handle: entry + init happen once, shutdown when the last
// user goes away (the library itself stays mapped: RTLD_NODELETE).
struct LoadedLibrary {
  HostContext context;
  tdm_host_api host{};
  const tdm_plugin* plugin = nullptr;
  ~LoadedLibrary() {
    if (plugin != nullptr && plugin->shutdown != nullptr) plugin->shutdown();
  }
};

namespace {

void fill_host(LoadedLibrary& lib) {
  tdm_host_api& h = lib.host;
  h.struct_size = sizeof h;
  h.abi_major = TDM_ABI_MAJOR;
  h.abi_minor = TDM_ABI_MINOR;
  h.ctx = &lib.context;
  h.log = host_log;
  h.set_error = host_set_error;
  h.config_get = host_config_get;
  h.scratch_alloc = host_scratch_alloc;
  h.scratch_free = host_scratch_free;
  h.graph = nullptr;
  h.run_scalar_get = host_scalar_get;
  h.run_scalar_set = host_scalar_set;
}

// The descriptor the entry point returns, checked exactly as the host
// checks it (tandem/plugin_check.hpp); nullptr and the outcome when the
// plugin refuses, fails a check, or is not a backend.
// Check 5 of plugin_check.hpp for `name`: false and the outcome when the
// plugin would shadow an installed one without the user's override.
bool not_shadowing(const std::string& path, const std::string& name, const OpenOptions& options,
                   Outcome& outcome) {
  const std::optional<std::filesystem::path> installed =
      plugin_check::shadowed_plugin(path, name, options.system_dirs);
  if (!installed) return true;
  for (const std::string& allowed : options.override_plugins)
    if (allowed == name) {
      std::fprintf(stderr, "warning: %s\n", plugin_check::override_warning(path, name, *installed).c_str());
      return true;
    }
  outcome = Outcome::fail(plugin_check::shadow_refusal(path, name, *installed).message);
  return false;
}

const tdm_plugin* enter(tdm_plugin_entry_fn entry, LoadedLibrary& lib, const std::string& path,
                        Outcome& outcome, bool accept_comm) {
  clear_plugin_error();
  const tdm_plugin* plugin = nullptr;
  const tdm_status entered = call_plugin(TDM_PLUGIN_ENTRY_SYMBOL, [&] {
    plugin = entry(&lib.host, TDM_ABI_MAJOR, TDM_ABI_MINOR);
    return TDM_OK;
  });
  if (entered != TDM_OK) {
    outcome = Outcome::fail("plugin '" + path + "': " + last_plugin_error());
    return nullptr;
  }
  if (plugin == nullptr) {
    outcome = Outcome::fail("plugin '" + path + "' refused to load: " + message_or("no reason given"));
    return nullptr;
  }
  if (plugin_check::Verdict refused = plugin_check::check_descriptor(*plugin, path)) {
    outcome = Outcome::fail(refused->message);
    return nullptr;
  }
  if (plugin->kind != TDM_PLUGIN_BACKEND && !(accept_comm && plugin->kind == TDM_PLUGIN_COMM)) {
    outcome = Outcome::fail("plugin '" + path + "' is a " + plugin_check::kind_name(plugin->kind) +
                            " plugin; the conformance kit tests backends and comm plugins");
    return nullptr;
  }
  return plugin;
}

// init with an empty section; false and the outcome when it fails.
bool initialise(const tdm_plugin& plugin, const std::string& path, Outcome& outcome) {
  if (plugin.init == nullptr) return true;
  tdm_config config{};
  config.struct_size = sizeof config;
  clear_plugin_error();
  const tdm_status status = call_plugin("init", [&] { return plugin.init(&config); });
  if (status == TDM_UNAVAILABLE) {
    outcome = {Status::skipped, message_or("init reported the device unavailable")};
    return false;
  }
  if (status != TDM_OK) {
    outcome = Outcome::fail("plugin '" + path + "' init failed (status " + std::to_string(status) +
                            "): " + message_or("no reason given"));
    return false;
  }
  return true;
}

std::shared_ptr<LoadedLibrary> load_library(const std::string& path, Outcome& outcome,
                                            const OpenOptions& options) {
  static std::mutex mutex;
  static std::map<void*, std::weak_ptr<LoadedLibrary>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  // The host's file checks, before dlopen (a file cut short would kill this
  // process inside the dynamic loader).
  if (plugin_check::Verdict insecure = plugin_check::check_not_writable_by_others(path)) {
    if (!options.allow_insecure) {
      outcome = Outcome::fail(insecure->message);
      return nullptr;
    }
    if (verbose()) std::fprintf(stderr, "loading anyway: %s\n", insecure->message.c_str());
  }
  if (plugin_check::Verdict damaged = plugin_check::check_plugin_file(path)) {
    outcome = Outcome::fail(damaged->message);
    return nullptr;
  }
  const std::string stem = std::filesystem::path(path).stem().string();  // "libtandem-<name>"
  if (stem.rfind("libtandem-", 0) == 0 && !not_shadowing(path, stem.substr(10), options, outcome))
    return nullptr;
  // By path, as the host loads: a bare file name would make dlopen search
  // the library path instead of opening the file just checked.
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  const std::string file = ec ? path : absolute.string();
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* why = dlerror();
    outcome = Outcome::fail("cannot load plugin '" + path + "': " + (why ? why : "unknown dlopen error") +
                            " (check the path, and that its dependencies are on the library path)");
    return nullptr;
  }
  if (auto existing = loaded[handle].lock()) return existing;
  auto entry = reinterpret_cast<tdm_plugin_entry_fn>(dlsym(handle, TDM_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) {
    outcome =
        Outcome::fail("'" + path + "' is not a Tandem plugin: it does not export " + TDM_PLUGIN_ENTRY_SYMBOL);
    return nullptr;
  }
  auto lib = std::make_shared<LoadedLibrary>();
  lib->context.path = path;
  lib->context.config = options.config;
  fill_host(*lib);
  const tdm_plugin* plugin = enter(entry, *lib, path, outcome, options.accept_comm);
  if (plugin == nullptr || !not_shadowing(path, plugin->name, options, outcome) ||
      !initialise(*plugin, path, outcome))
    return nullptr;
  lib->plugin = plugin;
  loaded[handle] = lib;
  return lib;
}

}  // namespace

std::unique_ptr<PluginUnderTest> PluginUnderTest::load(const std::string& path, Outcome& outcome,
                                                       const OpenOptions& options) {
  outcome = Outcome::success();
  std::unique_ptr<PluginUnderTest> p(new PluginUnderTest());
  p->path_ = path;
  p->library_ = load_library(path, outcome, options);
  if (!p->library_) return nullptr;
  p->api_ = p->library_->plugin->backend;
  return p;
}

std::unique_ptr<PluginUnderTest> PluginUnderTest::open(const std::string& path, Outcome& outcome,
                                                       const OpenOptions& options) {
  std::unique_ptr<PluginUnderTest> p = load(path, outcome, options);
  if (!p) return nullptr;
  outcome = p->open_device(0);
  return outcome.ok() ? std::move(p) : nullptr;
}

Outcome PluginUnderTest::open_device(uint32_t index) {
  const tdm_backend_api& api = *api_;
  uint32_t count = 0;
  clear_plugin_error();
  tdm_status status = call_plugin("device_count", [&] { return api.device_count(&count); });
  if (status == TDM_UNAVAILABLE || (status == TDM_OK && count <= index))
    return {Status::skipped, message_or("the plugin reports no usable device")};
  if (status != TDM_OK)
    return Outcome::fail("device_count failed (status " + std::to_string(status) + "): " + message_or("?"));
  clear_plugin_error();
  status = call_plugin("device_open", [&] { return api.device_open(index, &device_); });
  if (status == TDM_UNAVAILABLE)
    return {Status::skipped, message_or("device " + std::to_string(index) + " is unavailable")};
  if (status != TDM_OK || device_ == nullptr)
    return Outcome::fail("device_open(" + std::to_string(index) + ") failed (status " +
                         std::to_string(status) + "): " + message_or("?"));
  clear_plugin_error();
  status = call_plugin("stream_create", [&] { return api.stream_create(device_, &stream_); });
  if (status != TDM_OK || stream_ == nullptr)
    return Outcome::fail("stream_create failed (status " + std::to_string(status) + "): " + message_or("?"));
  return Outcome::success();
}

PluginUnderTest::~PluginUnderTest() {
  if (api_ != nullptr && stream_ != nullptr)
    call_plugin("stream_destroy", [&] { api_->stream_destroy(stream_); });
  if (api_ != nullptr && device_ != nullptr)
    call_plugin("device_close", [&] { api_->device_close(device_); });
}

const tdm_comm_api* PluginUnderTest::comm_api() const noexcept {
  return library_->plugin->kind == TDM_PLUGIN_COMM ? library_->plugin->comm : nullptr;
}

const tdm_plugin& PluginUnderTest::descriptor() const noexcept {
  return *library_->plugin;
}

std::string PluginUnderTest::name() const {
  const tdm_plugin* p = library_->plugin;
  return p->name != nullptr ? p->name : "?";
}

std::string PluginUnderTest::description() const {
  const tdm_plugin* p = library_->plugin;
  auto s = [](const char* c) { return std::string(c != nullptr ? c : "?"); };
  return s(p->name) + " " + s(p->version) + " (sdk " + s(p->sdk_version) + "): " + s(p->description);
}

std::string PluginUnderTest::device_name() const {
  tdm_device_info info{};
  info.struct_size = sizeof info;
  if (api_->device_info == nullptr || api_->device_info(device_, &info) != TDM_OK || info.name == nullptr)
    return "?";
  return info.name;
}

}  // namespace tandem::conformance
