// oneDNN backend — thread configuration, the op registry, the device's prepare.
#include "device.hpp"

#include <omp.h>
#include <sys/mman.h>

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

OnednnBackend::OnednnBackend() {
  const std::optional<std::string> threads = Host::config("threads");
  if (!threads) return;
  const int n = parse_threads(*threads);
  if (n == 0) {
    Host::log(TDM_LOG_WARNING,
              "onednn: ignoring threads = '" + *threads + "' (not a whole number from 1 to 4096)");
    return;
  }
  omp_set_num_threads(n);
  Host::log(TDM_LOG_INFO, "onednn: using " + std::to_string(n) + " threads");
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
  if (index != 0)
    throw Error(TDM_INVALID_ARGUMENT, "onednn: device index " + std::to_string(index) +
                                          " does not exist (the onednn backend has 1 device)");
  return device_;
}

}  // namespace tandem::onednn
