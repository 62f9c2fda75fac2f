// The CPUs of the onednn backend's devices: the process's affinity mask cut
// into N contiguous groups, or one group per NUMA node, as the host key
// "plugins.onednn.devices" asks (`--plugin-option onednn.devices=N|numa`).
//
// No oneDNN and no OpenMP here: tests/onednn compiles this file into its
// test binary and checks the splits and the sysfs parsing on their own.
#ifndef TANDEM_ONEDNN_CPU_GROUPS_HPP
#define TANDEM_ONEDNN_CPU_GROUPS_HPP

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace tandem::onednn {

using CpuList = std::vector<int>;  // CPU numbers, increasing, no repeats

// The CPUs this process may run on (sched_getaffinity of the calling
// thread), increasing. Where the mask cannot be read: CPUs 0 to the number
// online - 1.
CpuList affinity_cpus();

// The kernel's list notation ("0-3,8,10-11", as in sysfs cpulist files;
// whitespace around it ignored); nullopt when malformed. "" is the empty list.
std::optional<CpuList> parse_cpu_list(const std::string& text);
// The same notation for `cpus`: "0-3,8".
std::string cpu_list_str(const CpuList& cpus);

// `cpus` cut into `n` contiguous groups (1 <= n <= cpus.size()) whose sizes
// differ by one at most, the larger ones first.
std::vector<CpuList> split_evenly(const CpuList& cpus, size_t n);

// One group per NUMA node that holds some of `cpus`
// (`node_dir`/node<k>/cpulist), in node order, each the node's CPUs that are
// in `cpus`; a CPU no node lists is left out. One group of all `cpus` where
// no node can be read (no NUMA support in the kernel, no sysfs).
std::vector<CpuList> numa_groups(const CpuList& cpus,
                                 const std::string& node_dir = "/sys/devices/system/node");

// The groups the value of "plugins.onednn.devices" asks for, over `cpus`:
// a whole number N from 1 to cpus.size(), or "numa". `error` says what is
// wrong with any other value (and `groups` is empty then).
struct DeviceGroups {
  std::vector<CpuList> groups;
  std::string error;
};
DeviceGroups device_groups(const std::string& value, const CpuList& cpus,
                           const std::string& node_dir = "/sys/devices/system/node");

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_CPU_GROUPS_HPP
