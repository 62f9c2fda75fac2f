#include "cli/feature_flag.hpp"

#include <algorithm>
#include <cctype>

namespace tandem::cli {

host::Result<FeatureFlag> parse_feature_flag(const std::string& text) {
  const size_t colon = text.find(':');
  FeatureFlag flag;
  flag.name = text.substr(0, colon);
  const auto bad_name = [](char c) { return !(std::isalnum(static_cast<unsigned char>(c)) || c == '_'); };
  if (flag.name.empty() || std::any_of(flag.name.begin(), flag.name.end(), bad_name))
    return host::make_error("--feature " + text +
                                ": expected NAME[:KEY=VALUE,...], e.g. --feature amp:dtype=bf16 (NAME is a "
                                "feature plugin: letters, digits, _)",
                            TDM_INVALID_ARGUMENT);
  if (colon == std::string::npos) return flag;
  const std::string rest = text.substr(colon + 1);
  size_t begin = 0;
  while (begin <= rest.size()) {
    const size_t end = std::min(rest.find(',', begin), rest.size());
    const std::string pair = rest.substr(begin, end - begin);
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0)
      return host::make_error("--feature " + text + ": '" + pair + "' is not KEY=VALUE",
                              TDM_INVALID_ARGUMENT);
    flag.overrides.push_back("features." + flag.name + "." + pair);
    begin = end + 1;
  }
  return flag;
}

std::string empty_section_override(const std::string& name) {
  return "features." + name + "={}";
}

}  // namespace tandem::cli
