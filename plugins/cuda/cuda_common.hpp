// CUDA backend — what the host-side code of every op file shares: error
// checks, the stream and kernel classes, prepare-time validation (Check) and
// the op registry. Compiled by g++ (*.cpp) and by nvcc (*.cu host code).
#ifndef TANDEM_CUDA_CUDA_COMMON_HPP
#define TANDEM_CUDA_CUDA_COMMON_HPP

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/tandem.hpp"

namespace tandem::cuda {

using Dims = std::vector<int64_t>;

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

  // Opaque library handles, filled by ops/blas.cpp and ops/conv.cpp.
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

// Prepare-time validation; every message names the op and graph node.
class Check {
 public:
  explicit Check(const OpView& op) : op_(op) {}
  const OpView& op() const { return op_; }
  std::string where() const;
  [[noreturn]] void fail(const std::string& what) const;        // TDM_INVALID_ARGUMENT
  [[noreturn]] void unsupported(const std::string& why) const;  // TDM_UNSUPPORTED
  void counts(size_t min_in, size_t max_in, size_t min_out, size_t max_out) const;
  bool has_input(size_t i) const;
  bool has_output(size_t j) const;
  const TensorShape& in(size_t i) const { return op_.inputs().at(i); }
  const TensorShape& out(size_t j) const { return op_.outputs().at(j); }
  // Dtype of input i (must be in `allowed`, else unsupported).
  tdm_dtype dtype(size_t i, const std::vector<tdm_dtype>& allowed) const;
  void in_is(size_t i, tdm_dtype dtype, const Dims& dims) const;
  void out_is(size_t j, tdm_dtype dtype, const Dims& dims) const;
  size_t axis(int64_t axis, size_t rank) const;
  // Two-entry ints attribute (a single value is repeated).
  std::vector<int64_t> pair(const char* name, std::vector<int64_t> fallback) const;

 private:
  const OpView& op_;
};

inline const std::vector<tdm_dtype> kFloat = {TDM_F32, TDM_BF16, TDM_F16};
inline const std::vector<tdm_dtype> kF32Bf16 = {TDM_F32, TDM_BF16};
inline const std::vector<tdm_dtype> kF32 = {TDM_F32};

int64_t numel(const Dims& d);
std::string dims_str(const Dims& d);
std::string shape_str(tdm_dtype dtype, const Dims& d);  // "f32[2,3]"

inline std::unique_ptr<Kernel> make_kernel(const std::string& name, CudaKernel::Fn fn) {
  return std::make_unique<CudaKernel>(name, std::move(fn));
}

// Registry: one factory per op name, filled by each ops/ file's register_*.
using Factory = std::unique_ptr<Kernel> (*)(CudaDevice& device, const OpView& op, size_t& workspace);
using Registrar = std::function<void(const char* name, Factory)>;
Factory find_factory(const std::string& op);
void register_blas(const Registrar& add);
void register_conv(const Registrar& add);
void register_pool(const Registrar& add);
void register_elementwise(const Registrar& add);
void register_activation(const Registrar& add);
void register_softmax(const Registrar& add);
void register_norm(const Registrar& add);
void register_embedding(const Registrar& add);
void register_reduce(const Registrar& add);
void register_layout(const Registrar& add);
void register_optim(const Registrar& add);

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
