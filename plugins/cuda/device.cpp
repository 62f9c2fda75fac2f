// CUDA backend — devices, memory, streams, events and copies.
#include "device.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "gpu_support.hpp"
#include "vendor/nvml.hpp"
#include "vendor/vendor_libraries.hpp"

namespace tandem::cuda {

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky launch error so the next call is judged on its own
  if (status == cudaErrorNoKernelImageForDevice || status == cudaErrorUnsupportedPtxVersion)
    throw Error(TDM_UNAVAILABLE,
                std::string("cuda plugin: ") + what + ": " + cudaGetErrorString(status) +
                    ": this plugin is built for CUDA architectures " TANDEM_CUDA_ARCHITECTURES
                    " and the GPU is none of them, nor can its driver compile the PTX; "
                    "rebuild with -DCMAKE_CUDA_ARCHITECTURES naming the GPU's (nvidia-smi "
                    "--query-gpu=compute_cap --format=csv) or update the driver");
  throw Error(status == cudaErrorMemoryAllocation ? TDM_OUT_OF_MEMORY : TDM_INTERNAL,
              std::string("cuda plugin: ") + what + " failed: " + cudaGetErrorName(status) + " (" +
                  cudaGetErrorString(status) + ")");
}

void use_device(int index) {
  int current = -1;
  TDM_CUDA_CHECK(cudaGetDevice(&current));
  if (current != index) TDM_CUDA_CHECK(cudaSetDevice(index));
}

// ---- streams, events, kernels ---------------------------------------------

CudaStream::CudaStream(Device& device, int index) : Stream(device), index_(index) {
  use_device(index);
  TDM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaStream::~CudaStream() {
  if (blas != nullptr && blas_destroy != nullptr) blas_destroy(blas);
  if (dnn != nullptr && dnn_destroy != nullptr) dnn_destroy(dnn);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaStream::synchronize() {
  TDM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaKernel::launch(Stream& stream, void* const* in, void* const* out, void* workspace) {
  auto& s = static_cast<CudaStream&>(stream);
  use_device(s.device_index());
  fn_(s, in, out, workspace);
  TDM_CUDA_LAUNCHED(name_.c_str());
}

namespace {

class CudaEvent final : public Event {
 public:
  CudaEvent(Device& device, int index) : Event(device) {
    use_device(index);
    // Timing off: recording and waiting are cheaper and never synchronise.
    TDM_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  void record(Stream& s) override {
    TDM_CUDA_CHECK(cudaEventRecord(event_, static_cast<CudaStream&>(s).get()));
  }
  void make_wait(Stream& s) override {
    TDM_CUDA_CHECK(cudaStreamWaitEvent(static_cast<CudaStream&>(s).get(), event_, 0));
  }
  void synchronize() override { TDM_CUDA_CHECK(cudaEventSynchronize(event_)); }

 private:
  cudaEvent_t event_ = nullptr;
};

std::string mib(uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

}  // namespace

// ---- the device -------------------------------------------------------------

CudaDevice::CudaDevice(int index, const CudaOptions& options) : index_(index), options_(options) {
  cudaDeviceProp prop{};
  TDM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  name_ = prop.name;
  total_memory_ = prop.totalGlobalMem;
  compute_major_ = prop.major;
  pci_bus_id_ = pci_bus_id(prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  const std::string unsupported = unsupported_gpu_reason(index, name_, prop.major, prop.minor,
                                                         TANDEM_CUDA_MIN_ARCH, TANDEM_CUDA_ARCHITECTURES);
  if (!unsupported.empty()) throw Error(TDM_UNAVAILABLE, "cuda plugin: " + unsupported);
  // ABI 1.4 features: the architecture its kernels are built for, and the
  // tensor-core dtypes it has (bf16 from sm_80).
  features_ = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
              (prop.major >= 8   ? " f16 bf16"
               : prop.major >= 7 ? " f16"
                                 : "");
  cache_ = std::make_unique<CachingAllocator>(
      [index](size_t bytes) -> void* {
        void* p = nullptr;
        if (cudaSetDevice(index) != cudaSuccess) return nullptr;
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
          cudaGetLastError();  // an OOM is not sticky; clear it
          return nullptr;
        }
        return p;
      },
      [index](void* p) {
        cudaSetDevice(index);
        cudaFree(p);
      });
}

CudaDevice::~CudaDevice() {
  cache_.reset();
  if (prepare_dnn != nullptr && prepare_dnn_destroy != nullptr) prepare_dnn_destroy(prepare_dnn);
}

void CudaDevice::engage() {
  in_use_ = true;
  use_device(index_);
}

tdm_device_info CudaDevice::info() {
  size_t free_bytes = 0, total_bytes = total_memory_;
  std::optional<NvmlMemory> nvml;
  if (!in_use_ && (nvml = nvml_memory(pci_bus_id_))) {
    free_bytes = nvml->free;
  } else {
    // This process already has its context here (or there is no NVML to
    // ask without one): CUDA's figure, which also counts this process.
    engage();
    TDM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  }
  tdm_device_info i{};
  i.struct_size = sizeof i;
  i.name = name_.c_str();
  i.kind = TDM_DEVICE_GPU;
  i.total_memory = total_bytes;
  i.free_memory = free_bytes;
  i.has_pinned_host_memory = 1;
  i.host_addressable = 0;
  i.features = features_.c_str();
  return i;
}

void* CudaDevice::allocate(size_t bytes) {
  in_use_ = true;
  void* p = cache_->allocate(bytes);  // releases the cache and retries once inside
  if (p != nullptr) return p;
  size_t free_bytes = 0, total_bytes = 0;
  cudaSetDevice(index_);
  cudaMemGetInfo(&free_bytes, &total_bytes);
  throw Error(TDM_OUT_OF_MEMORY, "cuda plugin: cannot allocate " + std::to_string(bytes) + " bytes (" +
                                     mib(bytes) + ") on GPU " + std::to_string(index_) + " (" + name_ +
                                     "): " + mib(free_bytes) + " free of " + mib(total_bytes) +
                                     " after releasing the cache; reduce the batch size or place "
                                     "more layers on another device");
}

void CudaDevice::deallocate(void* pointer) noexcept {
  cache_->deallocate(pointer);
}

void* CudaDevice::allocate_pinned(size_t bytes) {
  engage();
  void* p = nullptr;
  cudaError_t status = cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error(TDM_OUT_OF_MEMORY, "cuda plugin: cannot pin " + std::to_string(bytes) +
                                       " bytes of host memory: " + cudaGetErrorString(status));
  }
  return p;
}

void CudaDevice::deallocate_pinned(void* pointer) noexcept {
  if (pointer != nullptr) cudaFreeHost(pointer);
}

void CudaDevice::on_new_stream(void (*set_up)(CudaStream&)) {
  std::lock_guard<std::mutex> lock(stream_set_up_mutex_);
  if (std::find(stream_set_ups_.begin(), stream_set_ups_.end(), set_up) == stream_set_ups_.end())
    stream_set_ups_.push_back(set_up);
}

std::unique_ptr<Stream> CudaDevice::create_stream() {
  in_use_ = true;
  auto stream = std::make_unique<CudaStream>(*this, index_);
  std::lock_guard<std::mutex> lock(stream_set_up_mutex_);
  for (auto set_up : stream_set_ups_) set_up(*stream);
  return stream;
}

std::unique_ptr<Event> CudaDevice::create_event() {
  in_use_ = true;
  return std::make_unique<CudaEvent>(*this, index_);
}

void CudaDevice::copy(Stream& stream, void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  engage();
  const cudaMemcpyKind k = kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
                           : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                                            : cudaMemcpyDeviceToDevice;
  TDM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, static_cast<CudaStream&>(stream).get()));
}

bool CudaDevice::peer_access(Device& to) {
  const int peer = static_cast<CudaDevice&>(to).index_;
  if (peer == index_) return false;
  int can = 0;
  TDM_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, index_, peer));
  if (can == 0) return false;  // e.g. two GPUs on different PCIe root complexes
  engage();                    // access is granted to the current device's context
  const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // not an error here: a second run, or the other direction's set-up
    return true;
  }
  TDM_CUDA_CHECK(e);
  return true;
}

void CudaDevice::copy_peer(Stream& stream, Device& to, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  engage();
  TDM_CUDA_CHECK(cudaMemcpyPeerAsync(dst, static_cast<CudaDevice&>(to).index_, src, index_, bytes,
                                     static_cast<CudaStream&>(stream).get()));
}

std::unique_ptr<Kernel> CudaDevice::prepare(const OpView& op, size_t& workspace_bytes) {
  workspace_bytes = 0;
  const Factory& factory = registry().resolve(op);  // unknown op, newer version, negative dims
  engage();
  return factory(*this, op, workspace_bytes);
}

tdm_memory_stats CudaDevice::memory_stats() {
  const AllocatorStats a = cache_->stats();
  tdm_memory_stats s{};
  s.struct_size = sizeof s;
  s.allocated = a.allocated;
  s.reserved = a.reserved;
  s.peak_allocated = a.peak_allocated;
  s.allocations = a.allocations;
  s.largest_free_block = a.largest_free_block;
  return s;
}

void CudaDevice::release_cached() {
  cache_->release_cached();
}

// ---- the backend ------------------------------------------------------------

namespace {
bool truthy(const std::string& v) {
  return v == "1" || v == "true" || v == "on" || v == "yes";
}
}  // namespace

CudaBackend::CudaBackend() {
  // TF32 tensor cores for f32 GEMMs and convolutions: faster, ~10-bit
  // mantissa products. Off by default so f32 stays f32 (--plugin-option cuda.tf32=true).
  if (auto v = Host::config("plugins.cuda.tf32")) options_.tf32 = truthy(*v);
  // Which cuDNN convolution algorithms prepare may take (math/conv_algorithm.hpp).
  if (auto v = Host::config("plugins.cuda.deterministic")) {
    const auto d = math::parse_determinism(*v);
    if (!d)
      throw Error(TDM_INVALID_ARGUMENT, "cuda plugin: --plugin-option cuda.deterministic=" + *v +
                                            " is not one of prefer, require, any");
    options_.conv.determinism = *d;
  }
  if (auto v = Host::config("plugins.cuda.conv_workspace_limit")) {
    const auto bytes = math::parse_bytes(*v);
    if (!bytes)
      throw Error(TDM_INVALID_ARGUMENT, "cuda plugin: --plugin-option cuda.conv_workspace_limit=" + *v +
                                            " is not a size in bytes (e.g. 268435456, 512MiB, 2GiB)");
    options_.conv.workspace_limit = *bytes;
  }
  if (auto v = Host::config("plugins.cuda.conv_api")) {
    const auto api = math::parse_conv_api(*v);
    if (!api)
      throw Error(TDM_INVALID_ARGUMENT,
                  "cuda plugin: --plugin-option cuda.conv_api=" + *v + " is not one of graph, legacy");
    options_.conv_api = *api;
  }
  // Attention on the tensor cores where it applies (math/attention_path.hpp),
  // or the f32-arithmetic kernels everywhere (to compare, or to rule one out).
  if (auto v = Host::config("plugins.cuda.attention")) {
    if (*v != "auto" && *v != "f32_tiles")
      throw Error(TDM_INVALID_ARGUMENT,
                  "cuda plugin: --plugin-option cuda.attention=" + *v + " is not one of auto, f32_tiles");
    options_.attention_mma = *v == "auto";
  }
}

uint32_t CudaBackend::device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    std::string why = cudaGetErrorString(status);
    if (status == cudaErrorInsufficientDriver)
      why = "driver not found or older than this plugin's CUDA runtime: " + why;
    else if (status == cudaErrorNoDevice)
      why = "no CUDA-capable GPU: " + why;
    // The reason alone: the host words it as "cuda: no device (<reason>)".
    throw Error(TDM_UNAVAILABLE, why);
  }
  return static_cast<uint32_t>(count);
}

Device& CudaBackend::device(uint32_t index) {
  const uint32_t count = device_count();
  if (index >= count)
    throw Error(TDM_INVALID_ARGUMENT, "cuda plugin: device " + std::to_string(index) + " does not exist (" +
                                          std::to_string(count) + " GPU(s))");
  load_vendor_libraries();  // the first open pays for cuBLAS and cuDNN, not every command
  std::lock_guard<std::mutex> lock(mutex_);
  if (devices_.size() < count) devices_.resize(count);
  if (!devices_[index]) devices_[index] = std::make_unique<CudaDevice>(static_cast<int>(index), options_);
  return *devices_[index];
}

}  // namespace tandem::cuda
