// Tandem SDK — a ready-made device for CPU backends, part of the header-only
// C++ helper (see tandem.hpp).
//
// Device memory is ordinary host memory (host_addressable = 1), 64-byte
// aligned, with allocator statistics for memory_stats.
//
// TANDEM_DEVICE_MEMORY_LIMIT="reference:0=64MiB,onednn:0=2GiB" gives a
// device a capacity smaller than the machine's memory: allocations beyond it
// fail with TDM_OUT_OF_MEMORY and device_info reports it, as a GPU of that
// size would. It lets heterogeneous placement (a device running out, the
// host re-planning) be exercised on a machine with CPUs only. Streams and events
// keep tandem.hpp's synchronous defaults. A CPU backend derives from it and
// implements prepare (and create_stream if it has a stream object of its own).
#ifndef TANDEM_HOST_DEVICE_HPP
#define TANDEM_HOST_DEVICE_HPP

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>

#include "tandem/byte_size.hpp"
#include "tandem/tandem.hpp"

namespace tandem {

class HostMemoryDevice : public Device {
 public:
  // `id` names the device in messages and info, e.g. "reference:0".
  explicit HostMemoryDevice(std::string id) : id_(std::move(id)), limit_(memory_limit(id_)) {}

  tdm_device_info info() override {
    if (!limit_error_.empty()) throw Error(TDM_INVALID_ARGUMENT, limit_error_);
    tdm_device_info i{};
    i.struct_size = sizeof i;
    i.name = id_.c_str();
    i.kind = TDM_DEVICE_CPU;
    i.total_memory = physical_memory();
    i.free_memory = available_memory();
    if (limit_ > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      i.total_memory = limit_;
      i.free_memory = limit_ - allocated_;
    }
    i.has_pinned_host_memory = 0;
    i.host_addressable = 1;
    return i;
  }

  void* allocate(size_t bytes) override {
    if (!limit_error_.empty()) throw Error(TDM_INVALID_ARGUMENT, limit_error_);
    // aligned_alloc wants a multiple of the alignment; a zero-byte request
    // still gets a unique pointer.
    const size_t rounded = bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (limit_ > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (rounded < bytes || allocated_ + bytes > limit_)
        throw Error(TDM_OUT_OF_MEMORY, id_ + ": cannot allocate " + std::to_string(bytes) + " bytes: " +
                                           std::to_string(allocated_) + " of its " + std::to_string(limit_) +
                                           " bytes are in use (TANDEM_DEVICE_MEMORY_LIMIT)");
    }
    void* p = rounded < bytes ? nullptr : std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr)
      throw Error(TDM_OUT_OF_MEMORY, id_ + ": cannot allocate " + std::to_string(bytes) +
                                         " bytes of host memory; reduce the batch size or free memory");
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[p] = bytes;
    allocated_ += bytes;
    peak_ = allocated_ > peak_ ? allocated_ : peak_;
    ++allocations_;
    return p;
  }

  void deallocate(void* pointer) noexcept override {
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

  tdm_memory_stats memory_stats() override {
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

 protected:
  const std::string& id() const noexcept { return id_; }

 private:
  static constexpr size_t kAlignment = 64;

  // This device's entry of TANDEM_DEVICE_MEMORY_LIMIT (bytes; B, KiB, MiB or
  // GiB after the number), 0 when there is none. An entry that is not a size
  // makes every allocation and info() fail naming it (a constructor must not throw).
  uint64_t memory_limit(const std::string& id) {
    const char* env = std::getenv("TANDEM_DEVICE_MEMORY_LIMIT");
    std::stringstream list(env != nullptr ? env : "");
    for (std::string item; std::getline(list, item, ',');) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos || item.substr(0, eq) != id) continue;
      const std::optional<uint64_t> bytes = parse_byte_size(item.substr(eq + 1));
      if (!bytes) {
        limit_error_ = "TANDEM_DEVICE_MEMORY_LIMIT: '" + item.substr(eq + 1) + "' for " + id +
                       " is not a size (a positive number, then B, KiB, MiB or GiB)";
        return 0;
      }
      return *bytes;
    }
    return 0;
  }

  static uint64_t physical_memory() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
  }

  // MemAvailable from /proc/meminfo (kB there); 0 when unreadable.
  static uint64_t available_memory() {
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

  std::string id_;
  std::string limit_error_;  // a malformed TANDEM_DEVICE_MEMORY_LIMIT entry
  uint64_t limit_ = 0;       // 0: the machine's memory
  std::mutex mutex_;         // guards everything below
  std::unordered_map<void*, size_t> sizes_;
  uint64_t allocated_ = 0;
  uint64_t peak_ = 0;
  uint64_t allocations_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_HOST_DEVICE_HPP
