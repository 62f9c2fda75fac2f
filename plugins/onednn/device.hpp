// oneDNN backend — the one CPU device "onednn:0".
//
// Memory is ordinary host memory (host_addressable = 1), 64-byte aligned,
// counted for memory_stats. Every tandem stream owns a dnnl::stream on the
// process-wide CPU engine; work runs to completion inside kernel_launch.
//
// Threads: oneDNN (Debian's build uses OpenMP) and our own loops share the
// OpenMP pool. The backend reads the host configuration key "threads" (set by
// `tandem train --threads N`) once, when the plugin is initialised, and calls
// omp_set_num_threads(N); without it OpenMP's default (OMP_NUM_THREADS, else
// one thread per core) applies.
#ifndef TANDEM_ONEDNN_DEVICE_HPP
#define TANDEM_ONEDNN_DEVICE_HPP

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "ops/common.hpp"

namespace tandem::onednn {

class OnednnStream final : public Stream {
 public:
  explicit OnednnStream(Device& d) : Stream(d), stream_(engine()) {}
  dnnl::stream& get() { return stream_; }
  void synchronize() override { stream_.wait(); }

 private:
  dnnl::stream stream_;
};

class OnednnDevice final : public Device {
 public:
  tdm_device_info info() override;
  void* allocate(size_t bytes) override;
  void deallocate(void* pointer) noexcept override;
  std::unique_ptr<Stream> create_stream() override { return std::make_unique<OnednnStream>(*this); }
  std::unique_ptr<Kernel> prepare(const OpView& op, size_t& workspace_bytes) override;
  tdm_memory_stats memory_stats() override;

 private:
  std::mutex mutex_;  // guards everything below
  std::unordered_map<void*, size_t> sizes_;
  uint64_t allocated_ = 0;
  uint64_t peak_ = 0;
  uint64_t allocations_ = 0;
};

class OnednnBackend final : public Backend {
 public:
  OnednnBackend();  // applies the "threads" configuration
  uint32_t device_count() override { return 1; }
  Device& device(uint32_t index) override;

 private:
  OnednnDevice device_;
};

// Parses the "threads" value; 0 when absent or not a positive integer.
int parse_threads(const std::string& value);

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_DEVICE_HPP
