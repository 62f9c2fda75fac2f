// Check 5: a plugin may not silently take the name of an installed one.
#include <system_error>

#include "tandem/plugin_check.hpp"

namespace fs = std::filesystem;

namespace tandem::plugin_check {

std::optional<fs::path> shadowed_plugin(const fs::path& file, const std::string& name,
                                        std::span<const fs::path> system_dirs) {
  if (name.empty()) return std::nullopt;
  const std::string file_name = "libtandem-" + name + ".so";
  for (const fs::path& dir : system_dirs) {
    std::error_code ec;
    const fs::path installed = dir / file_name;
    if (!fs::is_regular_file(installed, ec)) continue;
    // The installed file itself (or a link to it) replaces nothing; nor
    // does a file of the same directory, which the system set installed.
    if (fs::equivalent(installed, file, ec) || fs::equivalent(dir, file.parent_path(), ec))
      return std::nullopt;
    return installed;
  }
  return std::nullopt;
}

Refusal shadow_refusal(const fs::path& file, const std::string& name, const fs::path& installed,
                       const std::string& override_option) {
  return Refusal{
      "refusing plugin " + file.string() + ": it is named '" + name + "', like the installed plugin " +
          installed.string() +
          ", which it would silently replace. Rename it (its descriptor's name and libtandem-<name>.so), "
          "or pass " +
          override_option + " " + name + " to use it instead of the installed one",
      TDM_INVALID_ARGUMENT};
}

std::string override_warning(const fs::path& file, const std::string& name, const fs::path& installed,
                             const std::string& override_option) {
  return "plugin '" + name + "' is " + file.string() + ", not the installed " + installed.string() + " (" +
         override_option + " " + name + ")";
}

}  // namespace tandem::plugin_check
