// oneDNN backend — its CPU devices "onednn:0", "onednn:1", ...
//
// Memory is ordinary host memory (host_addressable = 1), 64-byte aligned,
// counted for memory_stats (HostMemoryDevice, one per device). Every tandem
// stream owns a dnnl::stream on the process-wide CPU engine; work runs to
// completion inside kernel_launch.
//
// Threads: oneDNN (Debian's build uses OpenMP) and our own loops share the
// OpenMP pool. By default there is one device, unbound: the backend reads
// the host configuration key "threads" (set by `tandem train --threads N`)
// once, when the plugin is initialised, and calls omp_set_num_threads(N);
// without it OpenMP's default (OMP_NUM_THREADS, else one thread per core)
// applies.
//
// Several devices ("plugins.onednn.devices" = N or numa, from
// `--plugin-option onednn.devices=N`): the process's CPUs cut into N groups
// (cpu_groups.hpp), one device each, so a model can be pipelined over them
// with one host thread driving each device. Such a device's prepare and
// every launch of its kernels first put the calling thread (and its OpenMP
// team) on the device's CPUs with the device's thread count
// (cpu_binding.hpp); "threads" is then the total, shared among them.
#ifndef TANDEM_ONEDNN_DEVICE_HPP
#define TANDEM_ONEDNN_DEVICE_HPP

#include <memory>
#include <vector>

#include "cpu_binding.hpp"
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
  // `binding`: this device's CPUs and threads, one of several devices; null
  // for the one device, which binds nothing.
  OnednnDevice(std::string id, std::shared_ptr<const CpuBinding> binding)
      : HostMemoryDevice(std::move(id)), binding_(std::move(binding)) {}
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

 private:
  std::unique_ptr<Kernel> prepare_kernel(const OpView& op, size_t& workspace_bytes);
  std::shared_ptr<const CpuBinding> binding_;
};

class OnednnBackend final : public Backend {
 public:
  static constexpr bool kNativeLayouts = true;  // fills tdm_backend_api.kernel_layouts
  // Applies "threads" and "plugins.onednn.devices"; throws
  // Error(TDM_INVALID_ARGUMENT) for a devices value it cannot follow.
  OnednnBackend();
  uint32_t device_count() override { return uint32_t(devices_.size()); }
  Device& device(uint32_t index) override;

 private:
  void add_bound_devices(const std::vector<CpuList>& groups, int threads);
  std::vector<std::unique_ptr<OnednnDevice>> devices_;
};

// Parses the "threads" value; 0 when absent or not a whole number from 1 to 4096.
int parse_threads(const std::string& value);

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_DEVICE_HPP
