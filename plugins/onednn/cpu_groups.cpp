// The CPUs of the onednn backend's devices (see cpu_groups.hpp).
#include "cpu_groups.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

namespace tandem::onednn {

namespace {

constexpr int kMaxCpus = 1 << 20;  // far beyond any kernel's; bounds what a malformed list allocates

// A decimal number of at most 7 digits (CPU numbers stay far below) at
// text[at...]; advances `at`.
std::optional<int> read_number(const std::string& text, size_t& at) {
  const size_t begin = at;
  while (at < text.size() && at - begin < 8 && text[at] >= '0' && text[at] <= '9') ++at;
  if (at == begin || at - begin > 7) return std::nullopt;
  return std::stoi(text.substr(begin, at - begin));
}

std::string trimmed(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

std::optional<int> whole_number(const std::string& value) {
  size_t at = 0;
  const std::optional<int> n = read_number(value, at);
  if (!n || at != value.size()) return std::nullopt;
  return n;
}

// The NUMA nodes under `node_dir`, by number, with their CPU lists; empty
// when none can be read.
std::map<int, CpuList> read_nodes(const std::string& node_dir) {
  std::map<int, CpuList> nodes;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(node_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("node", 0) != 0) continue;
    const std::optional<int> number = whole_number(name.substr(4));
    std::ifstream file(it->path() / "cpulist");
    if (!number || !file) continue;
    std::stringstream text;
    text << file.rdbuf();
    if (std::optional<CpuList> cpus = parse_cpu_list(text.str())) nodes[*number] = std::move(*cpus);
  }
  return nodes;
}

}  // namespace

CpuList affinity_cpus() {
  // A mask as wide as the kernel's: cpu_set_t holds 1024 CPUs, and
  // sched_getaffinity refuses a buffer narrower than the kernel's mask.
  for (int width = 1024; width <= kMaxCpus; width *= 2) {
    cpu_set_t* set = CPU_ALLOC(width);
    if (set == nullptr) break;
    const size_t bytes = CPU_ALLOC_SIZE(width);
    CPU_ZERO_S(bytes, set);
    const bool read = sched_getaffinity(0, bytes, set) == 0;
    const bool wider = !read && errno == EINVAL;
    CpuList cpus;
    for (int c = 0; read && c < width; ++c)
      if (CPU_ISSET_S(c, bytes, set)) cpus.push_back(c);
    CPU_FREE(set);
    if (read && !cpus.empty()) return cpus;
    if (!wider) break;
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  CpuList all(online > 0 ? size_t(online) : size_t(1));
  for (size_t c = 0; c < all.size(); ++c) all[c] = int(c);
  return all;
}

std::optional<CpuList> parse_cpu_list(const std::string& text) {
  const std::string s = trimmed(text);
  CpuList cpus;
  size_t at = 0;
  while (at < s.size()) {
    const std::optional<int> first = read_number(s, at);
    if (!first) return std::nullopt;
    std::optional<int> last = first;
    if (at < s.size() && s[at] == '-') last = read_number(s, ++at);
    if (!last || *last < *first || *last >= kMaxCpus) return std::nullopt;
    for (int c = *first; c <= *last; ++c) cpus.push_back(c);
    if (at < s.size() && s[at++] != ',') return std::nullopt;
    if (at == s.size() && s.back() == ',') return std::nullopt;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string cpu_list_str(const CpuList& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) {
      s += '-';
      s += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return s;
}

std::vector<CpuList> split_evenly(const CpuList& cpus, size_t n) {
  std::vector<CpuList> groups;
  if (n == 0) return groups;
  const size_t base = cpus.size() / n, larger = cpus.size() % n;
  size_t at = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t size = base + (k < larger ? 1 : 0);
    groups.emplace_back(cpus.begin() + long(at), cpus.begin() + long(at + size));
    at += size;
  }
  return groups;
}

std::vector<CpuList> numa_groups(const CpuList& cpus, const std::string& node_dir) {
  std::vector<CpuList> groups;
  for (const auto& [number, node_cpus] : read_nodes(node_dir)) {
    CpuList mine;
    std::set_intersection(node_cpus.begin(), node_cpus.end(), cpus.begin(), cpus.end(),
                          std::back_inserter(mine));
    if (!mine.empty()) groups.push_back(std::move(mine));
  }
  if (groups.empty()) groups.push_back(cpus);
  return groups;
}

DeviceGroups device_groups(const std::string& value, const CpuList& cpus, const std::string& node_dir) {
  DeviceGroups out;
  if (value == "numa") {
    out.groups = numa_groups(cpus, node_dir);
    return out;
  }
  const std::string count = std::to_string(cpus.size());
  const std::string option = "onednn plugin: --plugin-option onednn.devices=" + value;
  const std::optional<int> n = whole_number(value);
  if (n && *n > 0 && size_t(*n) <= cpus.size()) {
    out.groups = split_evenly(cpus, size_t(*n));
  } else if (n && *n > 0) {
    out.error = option + " asks for more devices than the " + count + " CPU(s) this process may run on (" +
                cpu_list_str(cpus) + "); each device needs a CPU of its own: give 1 to " + count +
                ", or numa";
  } else {
    out.error =
        option + " is not a whole number from 1 to " + count + " (the CPUs this process may run on) or numa";
  }
  return out;
}

}  // namespace tandem::onednn
