// CUDA backend — the device: memory (through the caching allocator), pinned
// host memory, streams, events, copies and kernel preparation.
#ifndef TANDEM_CUDA_DEVICE_HPP
#define TANDEM_CUDA_DEVICE_HPP

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "caching_allocator.hpp"
#include "cuda_common.hpp"
#include "math/conv_algorithm.hpp"

namespace tandem::cuda {

// What --plugin-option cuda.KEY=VALUE sets (host keys plugins.cuda.*),
// read once when the backend starts.
struct CudaOptions {
  bool tf32 = false;                              // cuda.tf32
  math::ConvAlgorithmOptions conv;                // cuda.deterministic, cuda.conv_workspace_limit
  math::ConvApi conv_api = math::ConvApi::graph;  // cuda.conv_api
  bool attention_mma = true;                      // cuda.attention: auto (true) or f32_tiles
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int index, const CudaOptions& options);
  ~CudaDevice() override;

  tdm_device_info info() override;
  void* allocate(size_t bytes) override;
  void deallocate(void* pointer) noexcept override;
  void* allocate_pinned(size_t bytes) override;
  void deallocate_pinned(void* pointer) noexcept override;
  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  void copy(Stream& stream, void* dst, const void* src, size_t bytes, CopyKind kind) override;
  // Peer access to another GPU's memory (cudaDeviceEnablePeerAccess) and
  // copies into it on this GPU's stream, where the two GPUs allow it.
  bool peer_access(Device& to) override;
  void copy_peer(Stream& stream, Device& to, void* dst, const void* src, size_t bytes) override;
  std::unique_ptr<Kernel> prepare(const OpView& op, size_t& workspace_bytes) override;
  tdm_memory_stats memory_stats() override;
  void release_cached() override;

  int index() const noexcept { return index_; }
  int compute_major() const noexcept { return compute_major_; }
  // What allocate(bytes) takes: the caching allocator's size class.
  uint64_t footprint(uint64_t bytes) override { return CachingAllocator::round_size(bytes); }
  bool tf32() const noexcept { return options_.tf32; }
  bool attention_mma() const noexcept { return options_.attention_mma; }
  const math::ConvAlgorithmOptions& conv_options() const noexcept { return options_.conv; }
  math::ConvApi conv_api() const noexcept { return options_.conv_api; }
  // Called by a kernel's prepare for what every stream it may launch on
  // needs (its cuBLAS or cuDNN handle): create_stream runs each such set-up
  // on the new stream, so the handles and their memory exist before the
  // run measures its memory, and launch never creates them.
  void on_new_stream(void (*set_up)(CudaStream&));
  // A cuDNN handle for prepare-time queries (algorithm choice), guarded by
  // prepare_mutex(); created on first use by ops/conv2d.cpp.
  std::mutex& prepare_mutex() noexcept { return prepare_mutex_; }
  void* prepare_dnn = nullptr;
  void (*prepare_dnn_destroy)(void*) = nullptr;

 private:
  int index_;
  CudaOptions options_;
  std::string name_;
  std::string features_;  // "sm_90 f16 bf16" (tdm_device_info.features)
  uint64_t total_memory_ = 0;
  int compute_major_ = 0;
  std::string pci_bus_id_;  // how NVML knows it
  // Set by the first call that needs this process's CUDA context on the
  // GPU (memory, streams, events, copies, kernels): until then info()
  // asks NVML, so describing a GPU never creates a context on it.
  std::atomic<bool> in_use_{false};
  void engage();  // in_use_ = true, and make it the current device
  std::unique_ptr<CachingAllocator> cache_;
  std::mutex prepare_mutex_;
  std::mutex stream_set_up_mutex_;
  std::vector<void (*)(CudaStream&)> stream_set_ups_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend();
  uint32_t device_count() override;
  Device& device(uint32_t index) override;

 private:
  std::mutex mutex_;
  CudaOptions options_;
  std::vector<std::unique_ptr<CudaDevice>> devices_;
};

}  // namespace tandem::cuda

#endif  // TANDEM_CUDA_DEVICE_HPP
