// CUDA backend — conv2d and its gradients on cuDNN 9's legacy convolution
// API (cudnnConvolutionForward / BackwardData / BackwardFilter). The
// algorithm is chosen once in prepare by cudnnGet*Algorithm_v7 (first
// heuristic answer whose workspace query succeeds) and its workspace is
// reported through prepare's workspace_bytes. f16/bf16 accumulate in f32.
// f32 uses FMA math (no TF32) unless [plugins.cuda] tf32 is set. Bias and
// dbias use our own kernels (ops/activation.cu), like linear.
#include <cudnn.h>

#include <memory>

#include "device.hpp"
#include "ops/launchers.hpp"

namespace tandem::cuda {
namespace {

void check_dnn(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw Error(status == CUDNN_STATUS_ALLOC_FAILED ? TDM_OUT_OF_MEMORY : TDM_INTERNAL,
                std::string("cuda plugin: ") + what + " failed: " + cudnnGetErrorString(status));
}

cudnnHandle_t make_handle(void*& slot, void (*&destroy)(void*)) {
  if (slot == nullptr) {
    cudnnHandle_t h = nullptr;
    check_dnn(cudnnCreate(&h), "cudnnCreate");
    slot = h;
    destroy = [](void* p) { cudnnDestroy(static_cast<cudnnHandle_t>(p)); };
  }
  return static_cast<cudnnHandle_t>(slot);
}

cudnnHandle_t dnn_handle(CudaStream& s) {
  const bool fresh = s.dnn == nullptr;
  cudnnHandle_t h = make_handle(s.dnn, s.dnn_destroy);
  if (fresh) check_dnn(cudnnSetStream(h, s.get()), "cudnnSetStream");
  return h;
}

enum class Dir { Forward, GradInput, GradWeight };

// Descriptors and the chosen algorithm; shared by the kernel closure.
struct Conv {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  size_t workspace = 0;
  ~Conv() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

template <class Perf, class Query, class Size>
void choose(Conv& cv, Query query, Size size, const Check& c) {
  Perf perf[16];
  int found = 0;
  check_dnn(query(perf, 16, &found), "cudnnGet*Algorithm_v7");
  for (int i = 0; i < found; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 0;
    if (size(perf[i].algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    cv.algo = static_cast<int>(perf[i].algo);
    cv.workspace = bytes;
    return;
  }
  c.unsupported("cuDNN has no algorithm for this convolution and dtype");
}

std::unique_ptr<Kernel> prepare_conv(CudaDevice& d, const OpView& v, size_t& workspace, Dir dir) {
  Check c(v);
  if (dir == Dir::Forward)
    c.counts(2, 3, 1, 1);
  else
    c.counts(2, 2, 1, dir == Dir::GradWeight ? 2 : 1);
  const tdm_dtype t = c.dtype(0, kFloat);
  const auto stride = c.pair("stride", {1, 1}), pad = c.pair("padding", {0, 0}),
             dil = c.pair("dilation", {1, 1});
  const int64_t groups = v.int_attr("groups", 1);
  // Shapes by role, whatever the direction.
  const Dims x = dir == Dir::GradInput ? c.out(0).dims : c.in(dir == Dir::Forward ? 0 : 1).dims;
  const Dims w = dir == Dir::GradWeight ? c.out(0).dims : c.in(1).dims;
  if (x.size() != 4 || w.size() != 4) c.fail("x and w must be rank 4 (NCHW, KCRS)");
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3], K = w[0], R = w[2], S = w[3];
  if (groups < 1 || C % groups != 0 || K % groups != 0 || w[1] != C / groups)
    c.fail("channels " + std::to_string(C) + "/" + std::to_string(K) + " do not fit groups " +
           std::to_string(groups));
  const int64_t P = (H + 2 * pad[0] - dil[0] * (R - 1) - 1) / stride[0] + 1;
  const int64_t Q = (W + 2 * pad[1] - dil[1] * (S - 1) - 1) / stride[1] + 1;
  const Dims y = {N, K, P, Q};
  if (dir == Dir::Forward) {
    c.in_is(1, t, w);
    c.out_is(0, t, y);
    if (c.has_input(2)) c.in_is(2, t, {K});
  } else {
    c.in_is(0, t, y);
    c.out_is(0, t, dir == Dir::GradInput ? x : w);
    if (dir == Dir::GradWeight) c.in_is(1, t, x);
  }
  const bool bias = dir == Dir::Forward
                        ? c.has_input(2)
                        : dir == Dir::GradWeight && v.int_attr("has_bias", 1) != 0 && c.has_output(1);
  if (dir == Dir::GradWeight && bias) c.out_is(1, t, {K});

  const cudnnDataType_t dt = t == TDM_F32    ? CUDNN_DATA_FLOAT
                             : t == TDM_BF16 ? CUDNN_DATA_BFLOAT16
                                             : CUDNN_DATA_HALF;
  auto cv = std::make_shared<Conv>();
  check_dnn(cudnnCreateTensorDescriptor(&cv->x), "cudnnCreateTensorDescriptor");
  check_dnn(cudnnCreateTensorDescriptor(&cv->y), "cudnnCreateTensorDescriptor");
  check_dnn(cudnnCreateFilterDescriptor(&cv->w), "cudnnCreateFilterDescriptor");
  check_dnn(cudnnCreateConvolutionDescriptor(&cv->conv), "cudnnCreateConvolutionDescriptor");
  check_dnn(cudnnSetTensor4dDescriptor(cv->x, CUDNN_TENSOR_NCHW, dt, int(N), int(C), int(H), int(W)),
            "x descriptor");
  check_dnn(cudnnSetTensor4dDescriptor(cv->y, CUDNN_TENSOR_NCHW, dt, int(N), int(K), int(P), int(Q)),
            "y descriptor");
  check_dnn(cudnnSetFilter4dDescriptor(cv->w, dt, CUDNN_TENSOR_NCHW, int(K), int(w[1]), int(R), int(S)),
            "w descriptor");
  check_dnn(
      cudnnSetConvolution2dDescriptor(cv->conv, int(pad[0]), int(pad[1]), int(stride[0]), int(stride[1]),
                                      int(dil[0]), int(dil[1]), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
      "convolution descriptor");
  check_dnn(cudnnSetConvolutionGroupCount(cv->conv, int(groups)), "cudnnSetConvolutionGroupCount");
  const cudnnMathType_t math = t != TDM_F32 ? CUDNN_TENSOR_OP_MATH
                               : d.tf32()   ? CUDNN_DEFAULT_MATH
                                            : CUDNN_FMA_MATH;
  check_dnn(cudnnSetConvolutionMathType(cv->conv, math), "cudnnSetConvolutionMathType");

  {
    std::lock_guard<std::mutex> lock(d.prepare_mutex());
    cudnnHandle_t h = make_handle(d.prepare_dnn, d.prepare_dnn_destroy);
    if (dir == Dir::Forward)
      choose<cudnnConvolutionFwdAlgoPerf_t>(
          *cv,
          [&](auto* p, int n, int* f) {
            return cudnnGetConvolutionForwardAlgorithm_v7(h, cv->x, cv->w, cv->conv, cv->y, n, f, p);
          },
          [&](cudnnConvolutionFwdAlgo_t a, size_t* b) {
            return cudnnGetConvolutionForwardWorkspaceSize(h, cv->x, cv->w, cv->conv, cv->y, a, b);
          },
          c);
    else if (dir == Dir::GradInput)
      choose<cudnnConvolutionBwdDataAlgoPerf_t>(
          *cv,
          [&](auto* p, int n, int* f) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, cv->w, cv->y, cv->conv, cv->x, n, f, p);
          },
          [&](cudnnConvolutionBwdDataAlgo_t a, size_t* b) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(h, cv->w, cv->y, cv->conv, cv->x, a, b);
          },
          c);
    else
      choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
          *cv,
          [&](auto* p, int n, int* f) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, cv->x, cv->y, cv->conv, cv->w, n, f, p);
          },
          [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* b) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, cv->x, cv->y, cv->conv, cv->w, a, b);
          },
          c);
  }
  workspace = cv->workspace;
  const int64_t inner = P * Q;
  const std::string name = std::string(v.op()) + ":cudnn algo " + std::to_string(cv->algo);
  return make_kernel(name, [=](CudaStream& s, void* const* in, void* const* o, void* ws) {
    if (N == 0) return;
    cudnnHandle_t h = dnn_handle(s);
    const float one = 1.0f, zero = 0.0f;
    if (dir == Dir::Forward) {
      check_dnn(cudnnConvolutionForward(h, &one, cv->x, in[0], cv->w, in[1], cv->conv,
                                        static_cast<cudnnConvolutionFwdAlgo_t>(cv->algo), ws, cv->workspace,
                                        &zero, cv->y, o[0]),
                "cudnnConvolutionForward");
      if (bias) launch_bias_act(t, o[0], in[2], N, K, inner, math::Act::None, s.get());
    } else if (dir == Dir::GradInput) {
      check_dnn(cudnnConvolutionBackwardData(h, &one, cv->w, in[1], cv->y, in[0], cv->conv,
                                             static_cast<cudnnConvolutionBwdDataAlgo_t>(cv->algo), ws,
                                             cv->workspace, &zero, cv->x, o[0]),
                "cudnnConvolutionBackwardData");
    } else {
      check_dnn(cudnnConvolutionBackwardFilter(h, &one, cv->x, in[1], cv->y, in[0], cv->conv,
                                               static_cast<cudnnConvolutionBwdFilterAlgo_t>(cv->algo), ws,
                                               cv->workspace, &zero, cv->w, o[0]),
                "cudnnConvolutionBackwardFilter");
      if (bias) launch_channel_sum(t, in[0], o[1], N, K, inner, s.get());
    }
  });
}

std::unique_ptr<Kernel> conv_fwd(CudaDevice& d, const OpView& v, size_t& ws) {
  return prepare_conv(d, v, ws, Dir::Forward);
}
std::unique_ptr<Kernel> conv_dx(CudaDevice& d, const OpView& v, size_t& ws) {
  return prepare_conv(d, v, ws, Dir::GradInput);
}
std::unique_ptr<Kernel> conv_dw(CudaDevice& d, const OpView& v, size_t& ws) {
  return prepare_conv(d, v, ws, Dir::GradWeight);
}

}  // namespace

void register_conv(const Registrar& add) {
  add("conv2d", conv_fwd);
  add("conv2d_grad_input", conv_dx);
  add("conv2d_grad_weight", conv_dw);
}

}  // namespace tandem::cuda
