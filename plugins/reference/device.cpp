// Reference backend — device, memory accounting, prepare.
#include "device.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "registry.hpp"

namespace tandem::reference {

namespace {

constexpr size_t kAlignment = 64;

uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
}

// MemAvailable from /proc/meminfo (kB there); 0 when unreadable.
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

}  // namespace

tdm_device_info ReferenceDevice::info() {
  tdm_device_info i{};
  i.struct_size = sizeof i;
  i.name = "reference:0";
  i.kind = TDM_DEVICE_CPU;
  i.total_memory = physical_memory();
  i.free_memory = available_memory();
  i.has_pinned_host_memory = 0;
  i.host_addressable = 1;
  return i;
}

void* ReferenceDevice::allocate(size_t bytes) {
  // aligned_alloc wants a multiple of the alignment; a zero-byte request still
  // gets a unique pointer.
  const size_t rounded = bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = rounded < bytes ? nullptr : std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr)
    throw Error(TDM_OUT_OF_MEMORY, "reference:0: cannot allocate " + std::to_string(bytes) +
                                       " bytes of host memory; reduce the batch size or free memory");
  std::lock_guard<std::mutex> lock(mutex_);
  sizes_[p] = bytes;
  allocated_ += bytes;
  peak_ = allocated_ > peak_ ? allocated_ : peak_;
  ++allocations_;
  return p;
}

void ReferenceDevice::deallocate(void* pointer) noexcept {
  if (pointer == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizes_.find(pointer);
    if (it == sizes_.end()) return;  // not ours: never free what we did not allocate
    allocated_ -= it->second;
    sizes_.erase(it);
  }
  std::free(pointer);
}

tdm_memory_stats ReferenceDevice::memory_stats() {
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

std::unique_ptr<Kernel> ReferenceDevice::prepare(const OpView& op, size_t& workspace_bytes) {
  return Registry::instance().prepare(op, workspace_bytes);
}

Device& ReferenceBackend::device(uint32_t index) {
  if (index != 0)
    throw Error(TDM_INVALID_ARGUMENT, "reference: device index " + std::to_string(index) +
                                          " does not exist (the reference backend has 1 device)");
  return device_;
}

}  // namespace tandem::reference
