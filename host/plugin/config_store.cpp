#include "plugin/config_store.hpp"

namespace tandem::host {

void ConfigStore::set(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  values_[key] = value;
}

void ConfigStore::erase(const std::string& key) {
  std::lock_guard lock(mutex_);
  values_.erase(key);
}

std::optional<std::string> ConfigStore::get(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, std::string> ConfigStore::section(const std::string& prefix) const {
  const std::string lead = prefix + ".";
  std::map<std::string, std::string> out;
  std::lock_guard lock(mutex_);
  for (auto it = values_.lower_bound(lead);
       it != values_.end() && it->first.compare(0, lead.size(), lead) == 0; ++it)
    out.emplace(it->first.substr(lead.size()), it->second);
  return out;
}

ConfigSectionView::ConfigSectionView(std::map<std::string, std::string> entries)
    : values_(std::move(entries)) {
  entries_.reserve(values_.size());
  for (const auto& [key, value] : values_) {
    tdm_config_entry e{};
    e.struct_size = sizeof e;
    e.key = key.c_str();
    e.value = value.c_str();
    entries_.push_back(e);
  }
  config_.struct_size = sizeof config_;
  config_.entries = entries_.empty() ? nullptr : entries_.data();
  config_.n_entries = entries_.size();
}

}  // namespace tandem::host
