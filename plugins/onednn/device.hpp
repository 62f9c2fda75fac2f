// oneDNN backend — the one CPU device "onednn:0".
//
// Memory is ordinary host memory (host_addressable = 1), 64-byte aligned,
// counted for memory_stats (HostMemoryDevice). Every tandem stream owns a dnnl::stream on the
// process-wide CPU engine; work runs to completion inside kernel_launch.
//
// Threads: oneDNN (Debian's build uses OpenMP) and our own loops share the
// OpenMP pool. The backend reads the host configuration key "threads" (set by
// `tandem train --threads N`) once, when the plugin is initialised, and calls
// omp_set_num_threads(N); without it OpenMP's default (OMP_NUM_THREADS, else
// one thread per core) applies.
#ifndef TANDEM_ONEDNN_DEVICE_HPP
#define TANDEM_ONEDNN_DEVICE_HPP

#include "cpu_isa.hpp"
#include "ops/layout.hpp"
#include "tandem/host_device.hpp"

namespace tandem::onednn {

class OnednnStream final : public Stream {
 public:
  explicit OnednnStream(Device& d) : Stream(d), stream_(engine()) {}
  dnnl::stream& get() { return stream_; }
  void synchronize() override { stream_.wait(); }

 private:
  dnnl::stream stream_;
};

// Memory, statistics and device info: the SDK's HostMemoryDevice.
class OnednnDevice final : public HostMemoryDevice {
 public:
  OnednnDevice() : HostMemoryDevice("onednn:0") {}
  std::unique_ptr<Stream> create_stream() override { return std::make_unique<OnednnStream>(*this); }
  // HostMemoryDevice's info plus the instruction sets oneDNN may use (ABI 1.4).
  tdm_device_info info() override {
    tdm_device_info i = HostMemoryDevice::info();
    i.features = cpu_features().c_str();
    return i;
  }
  // HostMemoryDevice's memory; blocks of 4 MiB and more (the executor's
  // arenas, large activations) asked to be backed by transparent huge pages.
  void* allocate(size_t bytes) override;
  std::unique_ptr<Kernel> prepare(const OpView& op, size_t& workspace_bytes) override;
  // Native layouts (ABI 1.3): nChw16c / nChw8c activations, see ops/layout.hpp.
  void kernel_layouts(const OpView& op, uint8_t* accepts, uint8_t* offers, uint64_t* native_bytes) override;
};

class OnednnBackend final : public Backend {
 public:
  static constexpr bool kNativeLayouts = true;  // fills tdm_backend_api.kernel_layouts
  OnednnBackend();                              // applies the "threads" configuration
  uint32_t device_count() override { return 1; }
  Device& device(uint32_t index) override;

 private:
  OnednnDevice device_;
};

// Parses the "threads" value; 0 when absent or not a whole number from 1 to 4096.
int parse_threads(const std::string& value);

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_DEVICE_HPP
