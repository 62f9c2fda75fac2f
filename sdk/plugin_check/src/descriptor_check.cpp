// The descriptor checks of rule 8, in its order, and the required functions
// of each kind's table (rules 21, 42, 46).
#include <string>
#include <vector>

#include "tandem/plugin_check.hpp"

namespace tandem::plugin_check {
namespace {

std::string version_text(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// The kind's table and the ABI 1.0 size it must reach; NULL table for an
// unknown kind.
struct KindTable {
  const void* table = nullptr;
  uint32_t size = 0;
  size_t minimum = 0;
};

KindTable kind_table(const tdm_plugin& d) {
  switch (d.kind) {
    case TDM_PLUGIN_BACKEND:
      return {d.backend, d.backend != nullptr ? d.backend->struct_size : 0u, abi10::kBackendApiSize};
    case TDM_PLUGIN_FEATURE:
      return {d.feature, d.feature != nullptr ? d.feature->struct_size : 0u, abi10::kFeatureApiSize};
    case TDM_PLUGIN_COMM:
      return {d.comm, d.comm != nullptr ? d.comm->struct_size : 0u, abi10::kCommApiSize};
    default:
      return {};
  }
}

}  // namespace

const char* kind_name(tdm_plugin_kind kind) noexcept {
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

std::string escaped_exception_text(const char* function, const std::exception* e) {
  return std::string("a C++ exception escaped from ") + function +
         (e != nullptr ? std::string(": ") + e->what() : std::string()) +
         " (sdk/ABI.md rule 14: every function a plugin gives the host catches everything and returns a "
         "status; fix the plugin)";
}

std::string missing_required_functions(const tdm_plugin& d) {
  std::vector<const char*> missing;
  auto need = [&](const void* fn, const char* name) {
    if (fn == nullptr) missing.push_back(name);
  };
#define TANDEM_NEED(table, fn) need(reinterpret_cast<const void*>(table->fn), #fn)
  if (const tdm_backend_api* b = d.kind == TDM_PLUGIN_BACKEND ? d.backend : nullptr) {
    TANDEM_NEED(b, device_count);
    TANDEM_NEED(b, device_open);
    TANDEM_NEED(b, device_close);
    TANDEM_NEED(b, device_info);
    TANDEM_NEED(b, mem_alloc);
    TANDEM_NEED(b, mem_free);
    TANDEM_NEED(b, stream_create);
    TANDEM_NEED(b, stream_destroy);
    TANDEM_NEED(b, stream_synchronize);
    TANDEM_NEED(b, copy_h2d);
    TANDEM_NEED(b, copy_d2h);
    TANDEM_NEED(b, copy_d2d);
    TANDEM_NEED(b, kernel_prepare);
    TANDEM_NEED(b, kernel_launch);
    TANDEM_NEED(b, kernel_release);
    // Called without a check by prefetching (the default) and by runs over
    // several devices: a table without them would crash there, not here.
    TANDEM_NEED(b, event_create);
    TANDEM_NEED(b, event_destroy);
    TANDEM_NEED(b, event_record);
    TANDEM_NEED(b, stream_wait_event);
    TANDEM_NEED(b, event_synchronize);
  }
  if (const tdm_feature_api* f = d.kind == TDM_PLUGIN_FEATURE ? d.feature : nullptr) {
    TANDEM_NEED(f, create);
    TANDEM_NEED(f, destroy);
  }
  if (const tdm_comm_api* c = d.kind == TDM_PLUGIN_COMM ? d.comm : nullptr) {
    TANDEM_NEED(c, comm_create);
    TANDEM_NEED(c, comm_destroy);
    TANDEM_NEED(c, allreduce);
    TANDEM_NEED(c, barrier);
  }
#undef TANDEM_NEED
  std::string text;
  for (const char* m : missing) text += (text.empty() ? "" : ", ") + std::string(m);
  return text;
}

Verdict check_descriptor(const tdm_plugin& d, const std::filesystem::path& file, uint32_t host_abi_major,
                         uint32_t host_abi_minor) {
  const std::string path = file.string();
  if (d.struct_size < abi10::kPluginSize)
    return Refusal{"plugin file " + path + " returned a descriptor of " + std::to_string(d.struct_size) +
                   " bytes, smaller than the ABI 1.0 minimum of " + std::to_string(abi10::kPluginSize) +
                   " bytes; the file is damaged or was not built with the Tandem SDK"};
  if (d.abi_major != host_abi_major)
    return Refusal{"plugin " + (d.name != nullptr ? std::string(d.name) : file.stem().string()) + " (" +
                       path + ") was built for Tandem ABI " + version_text(d.abi_major, d.abi_minor) +
                       "; this host speaks ABI " + version_text(host_abi_major, host_abi_minor) +
                       "; rebuild the plugin against SDK " + std::to_string(host_abi_major) +
                       ".x or use a matching host",
                   TDM_VERSION_MISMATCH};
  if (d.name == nullptr || d.name[0] == '\0')
    return Refusal{"plugin file " + path + " returned a descriptor without a name; fix the plugin"};

  const std::string who = "plugin " + std::string(d.name) + " (" + path + ")";
  const KindTable t = kind_table(d);
  if (t.minimum == 0)
    return Refusal{
        who + " reports unknown plugin kind " + std::to_string(d.kind) +
        "; this host knows backend, feature and comm plugins (is the plugin newer than the host?)"};
  const std::string kind = kind_name(d.kind);
  if (t.table == nullptr)
    return Refusal{who + " is a " + kind + " plugin but its " + kind + " table is NULL"};
  if (t.size < t.minimum)
    return Refusal{who + ": its " + kind + " table is " + std::to_string(t.size) +
                   " bytes, smaller than the ABI 1.0 minimum of " + std::to_string(t.minimum) +
                   " bytes; the file is damaged or was built against a pre-release SDK"};
  if (std::string missing = missing_required_functions(d); !missing.empty())
    return Refusal{who + ": its " + kind + " table lacks required functions: " + missing +
                   "; fix the plugin (sdk/ABI.md rule " +
                   (d.kind == TDM_PLUGIN_BACKEND   ? "21"
                    : d.kind == TDM_PLUGIN_FEATURE ? "42"
                                                   : "46") +
                   " lists them)"};
  return std::nullopt;
}

}  // namespace tandem::plugin_check
