// Flat key/value configuration that plugins read through
// tdm_host_api.config_get, and whose "plugins.<name>." / "features.<name>."
// entries are a plugin's section in init. The CLI fills it with one key
// today, "threads" (--threads N, N > 0; cli/cli_common.cpp); a feature's
// [features.NAME] table goes to its create, not here (sdk/ABI.md rules
// 38-40).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tandem/types.h"

namespace tandem::host {

class ConfigStore {
 public:
  void set(const std::string& key, const std::string& value);
  void erase(const std::string& key);
  std::optional<std::string> get(const std::string& key) const;
  // Entries under "<prefix>." with the prefix stripped: section("plugins.cuda").
  std::map<std::string, std::string> section(const std::string& prefix) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::string> values_;
};

// Owns the strings behind a tdm_config for the duration of one call.
class ConfigSectionView {
 public:
  explicit ConfigSectionView(std::map<std::string, std::string> entries);
  ConfigSectionView(const ConfigSectionView&) = delete;
  ConfigSectionView& operator=(const ConfigSectionView&) = delete;
  const tdm_config* get() const noexcept { return &config_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<tdm_config_entry> entries_;
  tdm_config config_{};
};

}  // namespace tandem::host
