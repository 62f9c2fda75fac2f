#include "plugin/loader.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <deque>
#include <mutex>

#include "plugin/abi_minimums.hpp"
#include "plugin/elf_check.hpp"
#include "plugin/file_security.hpp"
#include "plugin/search_path.hpp"
#include "tandem/version.h"
#include "util/last_error.hpp"
#include "util/logger.hpp"

namespace fs = std::filesystem;

namespace tandem::host {
namespace {

const std::string kHostAbi = std::to_string(TDM_ABI_MAJOR) + "." + std::to_string(TDM_ABI_MINOR);
constexpr std::string_view kCannotOpen = ": cannot open shared object file";

// Libraries are never unloaded (sdk/ABI.md rule 12: CUDA and NCCL start threads).
// RTLD_NODELETE makes dlclose a no-op, and the handles are kept here for the
// whole process anyway; the holder is leaked on purpose.
struct LibraryKeeper {
  std::mutex mutex;
  std::deque<boost::dll::shared_library> libraries;
};
LibraryKeeper& library_keeper() {
  static LibraryKeeper* k = new LibraryKeeper;  // intentionally never freed
  return *k;
}

// Boost 1.74's load_mode has no rtld_nodelete, but on POSIX it passes the
// native dlopen flags through unchanged, so the glibc flag is OR'ed in.
constexpr auto kLoadMode = static_cast<boost::dll::load_mode::type>(
    static_cast<unsigned>(boost::dll::load_mode::rtld_now) |
    static_cast<unsigned>(boost::dll::load_mode::rtld_local) | static_cast<unsigned>(RTLD_NODELETE));

Error refuse(std::string message, tdm_status status = TDM_INVALID_ARGUMENT) {
  return make_error(std::move(message), status);
}

std::string dlopen_advice(const fs::path& file, const std::string& loader_message) {
  std::string text = "cannot load plugin " + file.string() + ": " + loader_message;
  size_t at = loader_message.find(kCannotOpen);
  if (at != std::string::npos) {
    std::string missing = loader_message.substr(0, at);
    if (fs::path(missing).filename() != file.filename()) {
      return text + ". The plugin needs " + missing +
             ", which the dynamic loader cannot find: install the package that provides " + missing +
             " (the plugin's package should depend on it), or add the directory that contains it to "
             "LD_LIBRARY_PATH";
    }
  }
  return text +
         ". Check the file is a plugin built for this machine and that its dependencies resolve (ldd " +
         file.string() + ")";
}

Result<boost::dll::shared_library> open_library(const fs::path& file) {
  boost::dll::fs::error_code ec;
  boost::dll::shared_library library(boost::dll::fs::path(file.string()), kLoadMode, ec);
  if (ec || !library.is_loaded()) {
    const char* why = ::dlerror();  // Boost leaves the loader's message for us
    return refuse(dlopen_advice(file, why != nullptr ? why : ec.message()), TDM_UNAVAILABLE);
  }
  return library;
}

std::string str(const char* s) {
  return s != nullptr ? s : "";
}

// Which required 1.0 functions of the kind's table are missing (NULL).
std::string missing_required(const LoadedPlugin& p) {
  std::vector<const char*> missing;
  auto need = [&](const void* fn, const char* name) {
    if (fn == nullptr) missing.push_back(name);
  };
  if (const tdm_backend_api* b = p.backend) {
    need(reinterpret_cast<const void*>(b->device_count), "device_count");
    need(reinterpret_cast<const void*>(b->device_open), "device_open");
    need(reinterpret_cast<const void*>(b->device_close), "device_close");
    need(reinterpret_cast<const void*>(b->device_info), "device_info");
    need(reinterpret_cast<const void*>(b->mem_alloc), "mem_alloc");
    need(reinterpret_cast<const void*>(b->mem_free), "mem_free");
    need(reinterpret_cast<const void*>(b->stream_create), "stream_create");
    need(reinterpret_cast<const void*>(b->stream_destroy), "stream_destroy");
    need(reinterpret_cast<const void*>(b->stream_synchronize), "stream_synchronize");
    need(reinterpret_cast<const void*>(b->copy_h2d), "copy_h2d");
    need(reinterpret_cast<const void*>(b->copy_d2h), "copy_d2h");
    need(reinterpret_cast<const void*>(b->copy_d2d), "copy_d2d");
    need(reinterpret_cast<const void*>(b->kernel_prepare), "kernel_prepare");
    need(reinterpret_cast<const void*>(b->kernel_launch), "kernel_launch");
    need(reinterpret_cast<const void*>(b->kernel_release), "kernel_release");
    // Called without a check by prefetching (the default) and by runs over
    // several devices: a table without them would crash there, not here.
    need(reinterpret_cast<const void*>(b->event_create), "event_create");
    need(reinterpret_cast<const void*>(b->event_destroy), "event_destroy");
    need(reinterpret_cast<const void*>(b->event_record), "event_record");
    need(reinterpret_cast<const void*>(b->stream_wait_event), "stream_wait_event");
    need(reinterpret_cast<const void*>(b->event_synchronize), "event_synchronize");
  }
  if (const tdm_feature_api* f = p.feature) {
    need(reinterpret_cast<const void*>(f->create), "create");
    need(reinterpret_cast<const void*>(f->destroy), "destroy");
  }
  if (const tdm_comm_api* c = p.comm) {
    need(reinterpret_cast<const void*>(c->comm_create), "comm_create");
    need(reinterpret_cast<const void*>(c->comm_destroy), "comm_destroy");
    need(reinterpret_cast<const void*>(c->allreduce), "allreduce");
    need(reinterpret_cast<const void*>(c->barrier), "barrier");
  }
  std::string text;
  for (const char* m : missing) text += (text.empty() ? "" : ", ") + std::string(m);
  return text;
}

// The kind's table must be present and at least as large as in ABI 1.0.
Result<void> check_kind_table(LoadedPlugin& p, const tdm_plugin& d) {
  const std::string who = "plugin " + p.name + " (" + p.path.string() + ")";
  const void* table = nullptr;
  uint32_t size = 0;
  size_t minimum = 0;
  switch (d.kind) {
    case TDM_PLUGIN_BACKEND:
      p.backend = d.backend;
      table = d.backend;
      size = d.backend != nullptr ? d.backend->struct_size : 0;
      minimum = abi10::kBackendApiSize;
      break;
    case TDM_PLUGIN_FEATURE:
      p.feature = d.feature;
      table = d.feature;
      size = d.feature != nullptr ? d.feature->struct_size : 0;
      minimum = abi10::kFeatureApiSize;
      break;
    case TDM_PLUGIN_COMM:
      p.comm = d.comm;
      table = d.comm;
      size = d.comm != nullptr ? d.comm->struct_size : 0;
      minimum = abi10::kCommApiSize;
      break;
    default:
      return refuse(
          who + " reports unknown plugin kind " + std::to_string(d.kind) +
          "; this host knows backend, feature and comm plugins (is the plugin newer than the host?)");
  }
  const std::string kind = plugin_kind_name(d.kind);
  if (table == nullptr) return refuse(who + " is a " + kind + " plugin but its " + kind + " table is NULL");
  if (size < minimum)
    return refuse(who + ": its " + kind + " table is " + std::to_string(size) +
                  " bytes, smaller than the ABI 1.0 minimum of " + std::to_string(minimum) +
                  " bytes; the file is damaged or was built against a pre-release SDK");
  std::string missing = missing_required(p);
  if (!missing.empty())
    return refuse(who + ": its " + kind + " table lacks required functions: " + missing + "; fix the plugin");
  return {};
}

Result<void> check_descriptor(LoadedPlugin& p, const tdm_plugin& d) {
  const std::string file = p.path.string();
  if (d.struct_size < abi10::kPluginSize)
    return refuse("plugin file " + file + " returned a descriptor of " + std::to_string(d.struct_size) +
                  " bytes, smaller than the ABI 1.0 minimum of " + std::to_string(abi10::kPluginSize) +
                  " bytes; the file is damaged or was not built with the Tandem SDK");
  if (d.abi_major != TDM_ABI_MAJOR)
    return refuse("plugin " + (d.name != nullptr ? std::string(d.name) : p.name) + " (" + file +
                      ") was built for Tandem ABI " + std::to_string(d.abi_major) + "." +
                      std::to_string(d.abi_minor) + "; this host speaks ABI " + kHostAbi +
                      "; rebuild the plugin against SDK " + std::to_string(TDM_ABI_MAJOR) +
                      ".x or use a matching host",
                  TDM_VERSION_MISMATCH);
  if (d.name == nullptr || d.name[0] == '\0')
    return refuse("plugin file " + file + " returned a descriptor without a name; fix the plugin");
  p.name = d.name;
  p.kind = d.kind;
  p.version = str(d.version);
  p.sdk_version = str(d.sdk_version);
  p.description = str(d.description);
  p.abi_major = d.abi_major;
  p.abi_minor = d.abi_minor;
  p.abi_minor_effective = std::min<uint32_t>(TDM_ABI_MINOR, d.abi_minor);
  for (size_t i = 0; d.vendors != nullptr && i < d.n_vendors; ++i) {
    const tdm_vendor_version& v = d.vendors[i];
    if (v.struct_size < abi10::kVendorVersionSize) continue;
    p.vendors.push_back({str(v.name), str(v.version)});
  }
  return check_kind_table(p, d);
}

}  // namespace

const char* plugin_kind_name(tdm_plugin_kind kind) {
  switch (kind) {
    case TDM_PLUGIN_BACKEND:
      return "backend";
    case TDM_PLUGIN_FEATURE:
      return "feature";
    case TDM_PLUGIN_COMM:
      return "comm";
    default:
      return "unknown";
  }
}

std::string plugin_config_section(const LoadedPlugin& plugin) {
  return (plugin.kind == TDM_PLUGIN_FEATURE ? "features." : "plugins.") + plugin.name;
}

Result<LoadedPlugin> load_plugin_file(const fs::path& file, HostServices& services,
                                      const LoadFileOptions& options) {
  LoadedPlugin p;
  p.path = file;
  p.name = plugin_name_from_file(file);
  if (p.name.empty()) p.name = file.stem().string();

  Result<void> secure = check_not_writable_by_others(file);
  if (!secure) {
    if (!options.allow_insecure) return secure.error();
    log_warning("loading anyway (--allow-insecure-plugins): " + secure.error().message);
  }

  // Before dlopen: a file cut short would kill the process with SIGBUS
  // inside the dynamic loader (elf_check.hpp).
  if (Result<void> intact = check_plugin_file(file); !intact) return intact.error();
  Result<boost::dll::shared_library> library = open_library(file);
  if (!library) return library.error();
  if (!library->has(TDM_PLUGIN_ENTRY_SYMBOL))
    return refuse(file.string() +
                      " is not a Tandem plugin: it does not export " TDM_PLUGIN_ENTRY_SYMBOL
                      " (build it with tandem_add_plugin, or remove it from the plugin directory)",
                  TDM_NOT_FOUND);
  auto entry =
      library->get<const tdm_plugin*(const tdm_host_api*, uint32_t, uint32_t)>(TDM_PLUGIN_ENTRY_SYMBOL);
  {
    LibraryKeeper& keeper = library_keeper();
    std::lock_guard lock(keeper.mutex);
    keeper.libraries.push_back(std::move(*library));
  }

  PluginContext& context = services.create_context(p.name, file.string());
  p.context = &context;
  clear_last_error();
  const tdm_plugin* descriptor = entry(&context.api, TDM_ABI_MAJOR, TDM_ABI_MINOR);
  if (descriptor == nullptr)
    return refuse("plugin " + p.name + " (" + file.string() + ") refused to load: " +
                      last_error_text("[" + p.name + "] it returned no descriptor and gave no reason"),
                  TDM_UNAVAILABLE);
  p.descriptor = descriptor;
  Result<void> checked = check_descriptor(p, *descriptor);
  if (!checked) return checked.error();
  context.name = p.name;  // attribute later lines to the descriptor's name

  std::string expected = plugin_name_from_file(file);
  if (!expected.empty() && expected != p.name)
    log_warning("plugin file " + file.string() + " reports the name '" + p.name +
                "'; rename it to libtandem-" + p.name + ".so so --plugin-path users find it under its name");
  return p;
}

Result<void> init_plugin(LoadedPlugin& plugin, const ConfigStore& config) {
  if (plugin.initialized) return {};
  if (plugin.descriptor->init == nullptr) {
    plugin.initialized = true;
    return {};
  }
  ConfigSectionView section(config.section(plugin_config_section(plugin)));
  clear_last_error();
  tdm_status status = plugin.descriptor->init(section.get());
  if (status != TDM_OK)
    return refuse("plugin " + plugin.name + " (" + plugin.path.string() + ") failed to initialise: " +
                      last_error_text("[" + plugin.name + "] init returned status " + std::to_string(status)),
                  status);
  plugin.initialized = true;
  return {};
}

}  // namespace tandem::host
