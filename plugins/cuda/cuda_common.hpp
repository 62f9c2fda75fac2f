// CUDA backend — what the host-side code of every op file shares, on top of
// the SDK's backend kit (tandem/backend_kit.hpp: Check, the registry): error
// checks, the stream and kernel classes and the registry's declarations.
// Compiled by g++ (*.cpp) and by nvcc (*.cu host code).
#ifndef TANDEM_CUDA_CUDA_COMMON_HPP
#define TANDEM_CUDA_CUDA_COMMON_HPP

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/backend_kit.hpp"

namespace tandem::cuda {

// Throws tandem::Error(TDM_INTERNAL) naming the call and CUDA's reason.
void check_cuda(cudaError_t status, const char* what);
#define TDM_CUDA_CHECK(call) ::tandem::cuda::check_cuda((call), #call)
// After a <<<>>> launch: reports a bad configuration without synchronising.
#define TDM_CUDA_LAUNCHED(name) ::tandem::cuda::check_cuda(cudaGetLastError(), name)

class CudaDevice;

// A cudaStream_t plus the library handles bound to it. cuBLAS and cuDNN
// handles are per stream (a stream is used by one thread at a time, so no
// lock is needed); they are created on the stream's first cuBLAS/cuDNN
// launch and destroyed with the stream.
class CudaStream final : public Stream {
 public:
  CudaStream(Device& device, int index);
  ~CudaStream() override;
  void synchronize() override;
  void* native_handle() noexcept override { return stream_; }
  cudaStream_t get() const noexcept { return stream_; }
  int device_index() const noexcept { return index_; }

  // Opaque library handles, filled by ops/gemm.cpp and ops/conv2d.cpp.
  void* blas = nullptr;
  void (*blas_destroy)(void*) = nullptr;
  void* dnn = nullptr;
  void (*dnn_destroy)(void*) = nullptr;

 private:
  cudaStream_t stream_ = nullptr;
  int index_ = 0;
};

// The one kernel class: a closure over what prepare resolved. launch makes
// the device current, runs the closure (one or a few asynchronous launches,
// no allocation, no host sync) and reports launch errors.
class CudaKernel final : public Kernel {
 public:
  using Fn = std::function<void(CudaStream&, void* const* in, void* const* out, void* workspace)>;
  CudaKernel(std::string name, Fn fn) : name_("cuda:" + std::move(name)), fn_(std::move(fn)) {}
  void launch(Stream& stream, void* const* in, void* const* out, void* workspace) override;
  const char* describe() const noexcept override { return name_.c_str(); }

 private:
  std::string name_;
  Fn fn_;
};

// Makes `index` the current device of this thread when it is not already.
void use_device(int index);

// The SDK's Check (tandem/backend_kit.hpp), naming this backend in every
// message.
class Check : public tandem::Check {
 public:
  explicit Check(const OpView& op) : tandem::Check(op, "cuda") {}
};

inline const std::vector<tdm_dtype> kFloat = {TDM_F32, TDM_BF16, TDM_F16};
inline const std::vector<tdm_dtype> kF32Bf16 = {TDM_F32, TDM_BF16};
inline const std::vector<tdm_dtype> kF32 = {TDM_F32};

inline std::unique_ptr<Kernel> make_kernel(const std::string& name, CudaKernel::Fn fn) {
  return std::make_unique<CudaKernel>(name, std::move(fn));
}

// Registration: each section of sdk/ops.md this backend implements is one
// ops/<stem>.cu or .cpp, whose register function adds one registry entry per
// op and enlists itself in sections() while the library loads (registry.cpp
// builds the registry).
using Factory = std::unique_ptr<Kernel> (*)(CudaDevice& device, const OpView& op, size_t& workspace);
using Registry = KernelRegistry<Factory>;
SectionList<Registry>& sections();
const Registry& registry();

// Declines (Unsupported, with the reason) what launch_limits.hpp says
// cannot run: `why` empty means it can.
inline void decline_if(const Check& c, const std::string& why) {
  if (!why.empty()) c.unsupported(why);
}

// Threads per block for the simple grid-stride kernels, and the grid for n.
constexpr int kThreads = 256;
inline unsigned grid_for(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > 65535 * 8) blocks = 65535 * 8;  // grid-stride loops cover the rest
  return static_cast<unsigned>(blocks);
}

}  // namespace tandem::cuda

#endif  // TANDEM_CUDA_CUDA_COMMON_HPP
