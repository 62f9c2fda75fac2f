// Tandem SDK — the checks a plugin must pass before anyone uses it.
//
// One implementation, used by the `tandem` host when it loads a plugin and
// by the conformance kit when it opens one, so both give the same verdict on
// the same file (sdk/ABI.md rule 48): a file the host refuses never passes
// conformance, and the kit names the same reason the host would print.
//
// In the order a loader applies them:
//   1. check_not_writable_by_others  the file and its directory (rule 11);
//   2. check_plugin_file             the ELF headers, before dlopen: a file
//                                    cut short would kill the process with
//                                    SIGBUS inside the dynamic loader (rule 11);
//   3. (dlopen, resolve tdm_plugin_entry, call it)
//   4. check_descriptor              sizes, ABI major, name, the kind's table
//                                    and every required function (rules 8,
//                                    21, 42, 46);
//   5. shadowed_plugin               a plugin from a user's directory may not
//                                    take the name of an installed one
//                                    unless the user asks (rule 10).
// Each returns no Refusal when the plugin passes; a Refusal's message names
// the file and says what to do. call_catching is how both then call into
// a plugin.
#ifndef TANDEM_PLUGIN_CHECK_HPP
#define TANDEM_PLUGIN_CHECK_HPP

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

#include "tandem/plugin.h"

namespace tandem::plugin_check {

struct Refusal {
  std::string message;
  tdm_status status = TDM_INVALID_ARGUMENT;
};
using Verdict = std::optional<Refusal>;  // nullopt: the plugin passed

// The smallest struct_size a plugin built against SDK 1.0 writes, for every
// table a host receives (rule 4: accept any size >= the minimum, read only
// the fields that fit). Each is the size up to the last field ABI 1.0 had.
namespace abi10 {
inline constexpr size_t kPluginSize = TDM_STRUCT_SIZE(tdm_plugin, comm);
inline constexpr size_t kVendorVersionSize = TDM_STRUCT_SIZE(tdm_vendor_version, version);
inline constexpr size_t kBackendApiSize = TDM_STRUCT_SIZE(tdm_backend_api, kernel_release);
inline constexpr size_t kFeatureApiSize = TDM_STRUCT_SIZE(tdm_feature_api, on_step_end);
inline constexpr size_t kCommApiSize = TDM_STRUCT_SIZE(tdm_comm_api, barrier);
inline constexpr size_t kDeviceInfoSize = TDM_STRUCT_SIZE(tdm_device_info, host_addressable);
inline constexpr size_t kOpDescSize = TDM_STRUCT_SIZE(tdm_op_desc, n_outputs);
}  // namespace abi10

// "backend", "feature", "comm", or "unknown".
const char* kind_name(tdm_plugin_kind kind) noexcept;

// 1. Neither `file` nor its directory is writable by group or others. The
// refusal names the writable path, its mode and both ways out (chmod, or
// the caller's option to allow it, named by `allow_option`).
Verdict check_not_writable_by_others(const std::filesystem::path& file,
                                     const std::string& allow_option = "--allow-insecure-plugins");

// 2. `head`: the file's first bytes (at least through its program header
// table when the file has that many); `file_size`: its whole size. The
// refusal says what is wrong, without the file name.
Verdict check_elf_image(std::span<const uint8_t> head, uint64_t file_size);
// Reads what check_elf_image needs from `file`; the refusal names the file.
Verdict check_plugin_file(const std::filesystem::path& file);

// 4. The descriptor `tdm_plugin_entry` returned for `file`: at least the
// ABI 1.0 size, the host's ABI major (`host_abi_major`), a name, a known
// kind whose table is present, large enough and has every required function.
Verdict check_descriptor(const tdm_plugin& descriptor, const std::filesystem::path& file,
                         uint32_t host_abi_major = TDM_ABI_MAJOR, uint32_t host_abi_minor = TDM_ABI_MINOR);

// 5. Names. A plugin file outside the system plugin directories (the
// installed host's, or a build tree's own) named like a plugin inside one
// would silently replace it: the installed file it shadows, found by `name`
// (from the file name before loading, from the descriptor after), or
// nullopt when it shadows nothing (`file` is itself that installed file, or
// no installed plugin has the name). A loader refuses a shadowing plugin
// (shadow_refusal) unless the user named it in `override_option` (then it
// warns, on every command).
std::optional<std::filesystem::path> shadowed_plugin(const std::filesystem::path& file,
                                                     const std::string& name,
                                                     std::span<const std::filesystem::path> system_dirs);
Refusal shadow_refusal(const std::filesystem::path& file, const std::string& name,
                       const std::filesystem::path& installed,
                       const std::string& override_option = "--override-plugin");
std::string override_warning(const std::filesystem::path& file, const std::string& name,
                             const std::filesystem::path& installed,
                             const std::string& override_option = "--override-plugin");

// Calls `fn`, one call into a plugin (returning a tdm_status, or void for
// TDM_OK). A C++ exception escaping it, which rule 14 forbids, stops here:
// the call returns TDM_INTERNAL and `escaped` says which function let what
// escape, so the caller reports it like any failed call, naming its node or
// case, instead of the process ending in std::terminate or a generic error.
std::string escaped_exception_text(const char* function, const std::exception* e);
template <class Fn>
tdm_status call_catching(const char* function, std::string& escaped, Fn&& fn) noexcept {
  try {
    if constexpr (std::is_void_v<decltype(fn())>) {
      fn();
      return TDM_OK;
    } else {
      return fn();
    }
  } catch (const std::exception& e) {
    escaped = escaped_exception_text(function, &e);
  } catch (...) {
    escaped = escaped_exception_text(function, nullptr);
  }
  return TDM_INTERNAL;
}

// The required functions of the kind's table that are NULL, comma-separated
// ("kernel_launch, event_create"); empty when none is missing.
std::string missing_required_functions(const tdm_plugin& descriptor);

}  // namespace tandem::plugin_check

#endif
