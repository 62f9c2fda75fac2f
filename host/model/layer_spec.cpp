#include "model/model_spec.hpp"

namespace tandem::host::model {

int64_t LayerSpec::int_attr(const std::string& key, int64_t fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (const auto* v = std::get_if<int64_t>(&it->second)) return *v;
  return fallback;
}

double LayerSpec::float_attr(const std::string& key, double fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (const auto* v = std::get_if<double>(&it->second)) return *v;
  if (const auto* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
  return fallback;
}

bool LayerSpec::bool_attr(const std::string& key, bool fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (const auto* v = std::get_if<bool>(&it->second)) return *v;
  return fallback;
}

std::string LayerSpec::string_attr(const std::string& key, const std::string& fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (const auto* v = std::get_if<std::string>(&it->second)) return *v;
  return fallback;
}

std::vector<int64_t> LayerSpec::ints_attr(const std::string& key, std::vector<int64_t> fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return fallback;
}

}  // namespace tandem::host::model
