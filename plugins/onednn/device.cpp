// oneDNN backend — thread and device configuration, the op registry, the
// device's prepare.
#include "device.hpp"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace tandem::onednn {

namespace {

// A native tensor the kernel could not have offered or accepted means the
// host broke the contract: refuse it rather than misread the bytes.
void check_native_requests(const OpView& op, const OpEntry& entry) {
  const bool listed = entry.layouts != nullptr;
  auto check = [&](const std::vector<TensorShape>& tensors, bool output) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      const bool native = output ? op.output_native(i) : op.input_native(i);
      if (native && (!listed || !native_eligible(tensors[i])))
        Check(op).fail(std::string(output ? "output " : "input ") + std::to_string(i) +
                       " is marked native, which this op never offers for " + shape_str(tensors[i]));
    }
  };
  check(op.inputs(), false);
  check(op.outputs(), true);
}

bool uses_dtype(const OpView& op, tdm_dtype dtype) {
  for (const TensorShape& t : op.inputs())
    if (t.dtype == dtype) return true;
  for (const TensorShape& t : op.outputs())
    if (t.dtype == dtype) return true;
  return false;
}

}  // namespace

SectionList<Registry>& sections() {
  static SectionList<Registry> list;
  return list;
}

const Registry& registry() {
  static const Registry r = sections().build("onednn");
  return r;
}

void OnednnDevice::kernel_layouts(const OpView& op, uint8_t* accepts, uint8_t* offers,
                                  uint64_t* native_bytes) {
  const OpEntry* entry = registry().find(op.op());
  if (entry == nullptr || entry->layouts == nullptr || op.version() > 1) return;
  entry->layouts(op, LayoutAnswer{accepts, offers, native_bytes});
}

dnnl::stream& dnnl_stream(Stream& s) {
  return static_cast<OnednnStream&>(s).get();
}

int parse_threads(const std::string& value) {
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (end == value.c_str() || *end != '\0' || n <= 0 || n > 4096) return 0;
  return static_cast<int>(n);
}

namespace {

// The "threads" value; 0 when absent or not a number (warned about).
int configured_threads() {
  const std::optional<std::string> threads = Host::config("threads");
  if (!threads) return 0;
  const int n = parse_threads(*threads);
  if (n == 0)
    Host::log(TDM_LOG_WARNING,
              "onednn: ignoring threads = '" + *threads + "' (not a whole number from 1 to 4096)");
  return n;
}

}  // namespace

OnednnBackend::OnednnBackend() {
  const int threads = configured_threads();
  std::vector<CpuList> groups;
  if (const std::optional<std::string> devices = Host::config("plugins.onednn.devices")) {
    DeviceGroups asked = device_groups(*devices, affinity_cpus());
    if (!asked.error.empty()) throw Error(TDM_INVALID_ARGUMENT, asked.error);
    groups = std::move(asked.groups);
    if (*devices == "numa" && groups.size() == 1)
      Host::log(TDM_LOG_INFO, "onednn: devices = numa: this process's CPUs (" + cpu_list_str(groups[0]) +
                                  ") are on one NUMA node, so one device, unbound");
  }
  if (groups.size() > 1) {
    add_bound_devices(groups, threads);
    return;
  }
  // One device: no binding, the thread count set once for the process.
  devices_.push_back(std::make_unique<OnednnDevice>("onednn:0", nullptr));
  if (threads == 0) return;
  omp_set_num_threads(threads);
  Host::log(TDM_LOG_INFO, "onednn: using " + std::to_string(threads) + " threads");
}

// One bound device per group: the group's size in threads, or with
// "threads" = T the total T shared evenly (at least 1 each).
void OnednnBackend::add_bound_devices(const std::vector<CpuList>& groups, int threads) {
  const int n = int(groups.size());
  std::string line = "onednn: " + std::to_string(n) + " devices:";
  for (int k = 0; k < n; ++k) {
    const int team = threads > 0 ? std::max(1, threads / n) : int(groups[size_t(k)].size());
    auto binding = std::make_shared<const CpuBinding>(groups[size_t(k)], team);
    const std::string id = "onednn:" + std::to_string(k);
    devices_.push_back(std::make_unique<OnednnDevice>(id, binding));
    line += (k > 0 ? ", " : " ") + id + " cpus " + cpu_list_str(binding->cpus()) + " (" +
            std::to_string(team) + (team == 1 ? " thread)" : " threads)");
  }
  if (threads > 0) line += "; threads = " + std::to_string(threads) + " shared among them";
  Host::log(TDM_LOG_INFO, line);
}

void* OnednnDevice::allocate(size_t bytes) {
  void* p = HostMemoryDevice::allocate(bytes);
  // Transparent huge pages for the whole 2 MiB pages inside a large block
  // (Debian's default is madvise: only asked-for memory gets them). Why: the
  // GEMMs of a transformer step stream tens of MiB of activations, and with
  // 4 KiB pages the TLB covers a few MiB of them. A hint: where the kernel
  // declines, the memory stays as it is.
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  if (bytes >= 2 * kHuge) {
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
    if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
  return p;
}

std::unique_ptr<Kernel> OnednnDevice::prepare(const OpView& op, size_t& workspace_bytes) {
  if (!binding_) return prepare_kernel(op, workspace_bytes);
  // oneDNN fixes a primitive's thread count at its creation, and some own
  // kernels size their workspace by it: prepare as this device.
  binding_->apply();
  std::unique_ptr<Kernel> kernel = prepare_kernel(op, workspace_bytes);
  if (!kernel) return kernel;
  return std::make_unique<BoundKernel>(std::move(kernel), binding_);
}

std::unique_ptr<Kernel> OnednnDevice::prepare_kernel(const OpView& op, size_t& workspace_bytes) {
  workspace_bytes = 0;
  const OpEntry& entry = registry().resolve(op);  // unknown op, newer version, negative dims
  check_native_requests(op, entry);
  try {
    return entry.prepare(op, workspace_bytes);
  } catch (const dnnl::error& e) {
    // oneDNN found no implementation for this shape/dtype combination. On a
    // CPU without AVX-512 that is every bf16 primitive: say so, in words a
    // user can act on, rather than oneDNN's own.
    if (uses_dtype(op, TDM_BF16) && !cpu_has_bf16_kernels())
      throw Unsupported("onednn: op '" + op.op() + "' in bf16: " + cpu_bf16_missing_reason());
    throw Unsupported("onednn: op '" + op.op() + "': oneDNN declined: " + e.what());
  }
}

Device& OnednnBackend::device(uint32_t index) {
  const size_t n = devices_.size();
  if (index >= n)
    throw Error(TDM_INVALID_ARGUMENT, "onednn: device index " + std::to_string(index) +
                                          " does not exist (the onednn backend has " + std::to_string(n) +
                                          (n == 1 ? " device)" : " devices)"));
  return *devices_[index];
}

}  // namespace tandem::onednn
