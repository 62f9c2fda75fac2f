// oneDNN backend — device, memory accounting, thread configuration, op
// registry.
#include "device.hpp"

#include <omp.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace tandem::onednn {

namespace {

constexpr size_t kAlignment = 64;

uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
}

uint64_t available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

// Catalog name -> factory, built on first use.
const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> factories = [] {
    std::map<std::string, Factory> f;
    const Registrar add = [&f](const char* name, Factory factory) { f[name] = factory; };
    register_matmul(add);
    register_conv(add);
    register_pool(add);
    register_eltwise(add);
    register_binary(add);
    register_norm(add);
    register_loss(add);
    register_tensor(add);
    register_cast(add);
    register_optim(add);
    return f;
  }();
  return factories;
}

}  // namespace

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
    Host::log(TDM_LOG_WARNING, "onednn: ignoring threads = '" + *threads + "' (not a positive integer)");
    return;
  }
  omp_set_num_threads(n);
  Host::log(TDM_LOG_INFO, "onednn: using " + std::to_string(n) + " threads");
}

tdm_device_info OnednnDevice::info() {
  tdm_device_info i{};
  i.struct_size = sizeof i;
  i.name = "onednn:0";
  i.kind = TDM_DEVICE_CPU;
  i.total_memory = physical_memory();
  i.free_memory = available_memory();
  i.has_pinned_host_memory = 0;
  i.host_addressable = 1;
  return i;
}

void* OnednnDevice::allocate(size_t bytes) {
  const size_t rounded = bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = rounded < bytes ? nullptr : std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr)
    throw Error(TDM_OUT_OF_MEMORY, "onednn:0: cannot allocate " + std::to_string(bytes) +
                                       " bytes of host memory; reduce the batch size or free memory");
  std::lock_guard<std::mutex> lock(mutex_);
  sizes_[p] = bytes;
  allocated_ += bytes;
  peak_ = allocated_ > peak_ ? allocated_ : peak_;
  ++allocations_;
  return p;
}

void OnednnDevice::deallocate(void* pointer) noexcept {
  if (pointer == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizes_.find(pointer);
    if (it == sizes_.end()) return;  // never free what we did not allocate
    allocated_ -= it->second;
    sizes_.erase(it);
  }
  std::free(pointer);
}

tdm_memory_stats OnednnDevice::memory_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  tdm_memory_stats s{};
  s.struct_size = sizeof s;
  s.allocated = allocated_;
  s.reserved = allocated_;  // no cache: every block goes back to the system on free
  s.peak_allocated = peak_;
  s.allocations = allocations_;
  s.largest_free_block = 0;
  return s;
}

std::unique_ptr<Kernel> OnednnDevice::prepare(const OpView& op, size_t& workspace_bytes) {
  workspace_bytes = 0;
  const auto it = registry().find(op.op());
  if (it == registry().end()) throw Unsupported("onednn: op '" + op.op() + "' is not implemented");
  if (op.version() > 1)
    throw Unsupported("onednn: op '" + op.op() + "' version " + std::to_string(op.version()) +
                      " is newer than the catalog version 1 this plugin implements");
  auto check_dims = [&](const std::vector<TensorShape>& tensors, const char* kind) {
    for (size_t i = 0; i < tensors.size(); ++i)
      for (int64_t d : tensors[i].dims)
        if (d < 0)
          Check(op).fail(std::string(kind) + " " + std::to_string(i) + " has a negative dimension " +
                         shape_str(tensors[i]));
  };
  check_dims(op.inputs(), "input");
  check_dims(op.outputs(), "output");
  try {
    return it->second(op, workspace_bytes);
  } catch (const dnnl::error& e) {
    // oneDNN found no implementation for this shape/dtype combination.
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
