#include "plugin/loader.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <deque>
#include <mutex>

#include "plugin/plugin_call.hpp"
#include "plugin/search_path.hpp"
#include "tandem/plugin_check.hpp"
#include "tandem/version.h"
#include "util/last_error.hpp"
#include "util/logger.hpp"

namespace fs = std::filesystem;

namespace tandem::host {
namespace {

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

// The shared checks of rule 8 (tandem/plugin_check.hpp), then what the host
// keeps of the descriptor.
Result<void> check_descriptor(LoadedPlugin& p, const tdm_plugin& d) {
  if (plugin_check::Verdict refused = plugin_check::check_descriptor(d, p.path))
    return refuse(std::move(refused->message), refused->status);
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
    if (v.struct_size < plugin_check::abi10::kVendorVersionSize) continue;
    p.vendors.push_back({str(v.name), str(v.version)});
  }
  p.backend = d.kind == TDM_PLUGIN_BACKEND ? d.backend : nullptr;
  p.feature = d.kind == TDM_PLUGIN_FEATURE ? d.feature : nullptr;
  p.comm = d.kind == TDM_PLUGIN_COMM ? d.comm : nullptr;
  return {};
}

}  // namespace

const char* plugin_kind_name(tdm_plugin_kind kind) {
  return plugin_check::kind_name(kind);
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

  if (plugin_check::Verdict insecure = plugin_check::check_not_writable_by_others(file)) {
    if (!options.allow_insecure) return refuse(std::move(insecure->message), insecure->status);
    log_warning("loading anyway (--allow-insecure-plugins): " + insecure->message);
  }

  // Before dlopen: a file cut short would kill the process with SIGBUS
  // inside the dynamic loader (plugin_check.hpp).
  if (plugin_check::Verdict damaged = plugin_check::check_plugin_file(file))
    return refuse(std::move(damaged->message), damaged->status);
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
  const tdm_plugin* descriptor = nullptr;
  const tdm_status entered = call_plugin(p, TDM_PLUGIN_ENTRY_SYMBOL, [&] {
    descriptor = entry(&context.api, TDM_ABI_MAJOR, TDM_ABI_MINOR);
    return TDM_OK;
  });
  if (entered != TDM_OK)
    return refuse(
        "plugin " + p.name + " (" + file.string() + ") was skipped: " + last_error_text("its entry failed"),
        TDM_INTERNAL);
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
  const tdm_status status =
      call_plugin(plugin, "init", [&] { return plugin.descriptor->init(section.get()); });
  if (status != TDM_OK)
    return refuse("plugin " + plugin.name + " (" + plugin.path.string() + ") failed to initialise: " +
                      last_error_text("[" + plugin.name + "] init " + silent_failure(status)),
                  status);
  plugin.initialized = true;
  return {};
}

}  // namespace tandem::host
