#include "checkpoint/torch_names.hpp"

#include <array>
#include <utility>

namespace tandem::host::checkpoint {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// (Tandem suffix, PyTorch suffix): a norm's scale and shift.
constexpr std::array<std::pair<const char*, const char*>, 2> kRenamed = {
    {{".gamma", ".weight"}, {".beta", ".bias"}}};

}  // namespace

std::string torch_name(const std::string& name) {
  for (const auto& [ours, theirs] : kRenamed)
    if (ends_with(name, ours)) return name.substr(0, name.size() - std::string(ours).size()) + theirs;
  return name;
}

}  // namespace tandem::host::checkpoint
