// CUDA backend — conv2d and its gradients on cuDNN 9. By default each runs
// as a cuDNN graph (ops/conv_graph.hpp); cuda.conv_api=legacy keeps the
// deprecated cudnnConvolutionForward / BackwardData / BackwardFilter calls,
// which are also taken where cuDNN refuses to build the graph itself (the
// kernel's name says so). Either way the engine or algorithm is chosen once
// in prepare by the rule of math/conv_algorithm.hpp (deterministic first
// unless cuda.deterministic says otherwise, never a workspace above
// cuda.conv_workspace_limit) and its workspace is reported through
// prepare's workspace_bytes, so the plan holds it. f16/bf16 accumulate in
// f32. f32 uses FMA math (no TF32) unless --plugin-option cuda.tf32=true.
// Bias and dbias use our own kernels (ops/activation.cu), like linear.
#include <functional>
#include <memory>
#include <vector>

#include "device.hpp"
#include "launch_limits.hpp"
#include "math/conv_algorithm.hpp"
#include "ops/conv_graph.hpp"
#include "ops/launchers.hpp"
#include "vendor/cudnn.hpp"

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

using Dir = ConvDirection;

// Descriptors and the chosen algorithm; shared by the kernel closure.
struct Conv {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  size_t workspace = 0;
  bool deterministic = false;
  ~Conv() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// The heuristic's answers, then the rule of math/conv_algorithm.hpp
// (cuda.deterministic, cuda.conv_workspace_limit); none fitting is a decline
// with the reason, so the planner can place the convolution elsewhere.
template <class Perf, class Query, class Size>
void choose(Conv& cv, Query query, Size size, const math::ConvAlgorithmOptions& options, const Check& c) {
  Perf perf[16];
  int found = 0;
  check_dnn(query(perf, 16, &found), "cudnnGet*Algorithm_v7");
  std::vector<math::ConvAlgorithmCandidate> candidates;
  for (int i = 0; i < found; ++i) {
    math::ConvAlgorithmCandidate a;
    a.algo = static_cast<int>(perf[i].algo);
    a.deterministic = perf[i].determinism == CUDNN_DETERMINISTIC;
    a.usable =
        perf[i].status == CUDNN_STATUS_SUCCESS && size(perf[i].algo, &a.workspace) == CUDNN_STATUS_SUCCESS;
    candidates.push_back(a);
  }
  const math::ConvAlgorithmPick pick = math::pick_conv_algorithm(candidates, options);
  if (pick.index < 0) c.unsupported(pick.why_none);
  const math::ConvAlgorithmCandidate& a = candidates[size_t(pick.index)];
  cv.algo = a.algo;
  cv.workspace = a.workspace;
  cv.deterministic = a.deterministic;
}

// The op's geometry, whatever the direction, after validation.
struct ConvShape {
  tdm_dtype t = TDM_F32;
  int64_t N = 0, C = 0, H = 0, W = 0, K = 0, Cg = 0, R = 0, S = 0, P = 0, Q = 0, groups = 1;
  Dims stride, pad, dil;
  bool bias = false;  // forward: a bias input; grad_weight: a dbias output
};

ConvShape conv_shape(const Check& c, Dir dir) {
  ConvShape g;
  g.t = c.primary_dtype(0, kFloat);
  g.stride = c.pair_attr("stride", {1, 1}), g.pad = c.pair_attr("padding", {0, 0});
  g.dil = c.pair_attr("dilation", {1, 1});
  g.groups = c.int_attr("groups");
  // Shapes by role, whatever the direction.
  const Dims x = dir == Dir::GradInput ? c.out(0).dims : c.in(dir == Dir::Forward ? 0 : 1).dims;
  const Dims w = dir == Dir::GradWeight ? c.out(0).dims : c.in(1).dims;
  // The registry has checked the ranks, the groups, the window, every dim
  // and dtype (conv2d's rules).
  g.N = x[0], g.C = x[1], g.H = x[2], g.W = x[3], g.K = w[0], g.Cg = w[1], g.R = w[2], g.S = w[3];
  g.P = (g.H + 2 * g.pad[0] - g.dil[0] * (g.R - 1) - 1) / g.stride[0] + 1;
  g.Q = (g.W + 2 * g.pad[1] - g.dil[1] * (g.S - 1) - 1) / g.stride[1] + 1;
  g.bias = dir == Dir::Forward ? c.has_input(2)
                               : dir == Dir::GradWeight && c.int_attr("has_bias") != 0 && c.has_output(1);
  decline_if(c, cudnn_tensor_limit({g.N * g.C * g.H * g.W, g.N * g.K * g.P * g.Q, g.K * g.Cg * g.R * g.S}));
  return g;
}

cudnnDataType_t cudnn_dtype(tdm_dtype t) {
  return t == TDM_F32 ? CUDNN_DATA_FLOAT : t == TDM_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

std::shared_ptr<Conv> descriptors(const ConvShape& g, bool tf32) {
  const cudnnDataType_t dt = cudnn_dtype(g.t);
  auto cv = std::make_shared<Conv>();
  check_dnn(cudnnCreateTensorDescriptor(&cv->x), "cudnnCreateTensorDescriptor");
  check_dnn(cudnnCreateTensorDescriptor(&cv->y), "cudnnCreateTensorDescriptor");
  check_dnn(cudnnCreateFilterDescriptor(&cv->w), "cudnnCreateFilterDescriptor");
  check_dnn(cudnnCreateConvolutionDescriptor(&cv->conv), "cudnnCreateConvolutionDescriptor");
  check_dnn(cudnnSetTensor4dDescriptor(cv->x, CUDNN_TENSOR_NCHW, dt, int(g.N), int(g.C), int(g.H), int(g.W)),
            "x descriptor");
  check_dnn(cudnnSetTensor4dDescriptor(cv->y, CUDNN_TENSOR_NCHW, dt, int(g.N), int(g.K), int(g.P), int(g.Q)),
            "y descriptor");
  check_dnn(cudnnSetFilter4dDescriptor(cv->w, dt, CUDNN_TENSOR_NCHW, int(g.K), int(g.Cg), int(g.R), int(g.S)),
            "w descriptor");
  check_dnn(cudnnSetConvolution2dDescriptor(cv->conv, int(g.pad[0]), int(g.pad[1]), int(g.stride[0]),
                                            int(g.stride[1]), int(g.dil[0]), int(g.dil[1]),
                                            CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            "convolution descriptor");
  check_dnn(cudnnSetConvolutionGroupCount(cv->conv, int(g.groups)), "cudnnSetConvolutionGroupCount");
  const cudnnMathType_t math = g.t != TDM_F32 ? CUDNN_TENSOR_OP_MATH
                               : tf32         ? CUDNN_DEFAULT_MATH
                                              : CUDNN_FMA_MATH;
  check_dnn(cudnnSetConvolutionMathType(cv->conv, math), "cudnnSetConvolutionMathType");
  return cv;
}

// The algorithm and its workspace, from the device's prepare-time handle.
void choose_algorithm(CudaDevice& d, Conv& cv, Dir dir, const Check& c) {
  std::lock_guard<std::mutex> lock(d.prepare_mutex());
  cudnnHandle_t h = make_handle(d.prepare_dnn, d.prepare_dnn_destroy);
  if (dir == Dir::Forward)
    choose<cudnnConvolutionFwdAlgoPerf_t>(
        cv,
        [&](auto* p, int n, int* f) {
          return cudnnGetConvolutionForwardAlgorithm_v7(h, cv.x, cv.w, cv.conv, cv.y, n, f, p);
        },
        [&](cudnnConvolutionFwdAlgo_t a, size_t* b) {
          return cudnnGetConvolutionForwardWorkspaceSize(h, cv.x, cv.w, cv.conv, cv.y, a, b);
        },
        d.conv_options(), c);
  else if (dir == Dir::GradInput)
    choose<cudnnConvolutionBwdDataAlgoPerf_t>(
        cv,
        [&](auto* p, int n, int* f) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, cv.w, cv.y, cv.conv, cv.x, n, f, p);
        },
        [&](cudnnConvolutionBwdDataAlgo_t a, size_t* b) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(h, cv.w, cv.y, cv.conv, cv.x, a, b);
        },
        d.conv_options(), c);
  else
    choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
        cv,
        [&](auto* p, int n, int* f) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, cv.x, cv.y, cv.conv, cv.w, n, f, p);
        },
        [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* b) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, cv.x, cv.y, cv.conv, cv.w, a, b);
        },
        d.conv_options(), c);
}

// The chosen convolution, whatever the API: runs it on x, w, y by role (the
// gradient is y for Forward, x for GradInput, w for GradWeight).
struct Chosen {
  std::function<void(cudnnHandle_t, void* x, void* w, void* y, void* workspace)> run;
  size_t workspace = 0;
  std::string name;  // how the kernel describes itself
};

std::string determinism_note(bool deterministic) {
  return deterministic ? "" : " (not deterministic)";
}

// The graph API's plan, or no run where cuDNN refused the graph (`refused`
// says why); a decline where no engine fits the options.
Chosen graph_conv(CudaDevice& d, const ConvShape& g, Dir dir, const Check& c, std::string& refused) {
  ConvGraphShape shape;
  shape.dtype = cudnn_dtype(g.t);
  const int64_t x[4] = {g.N, g.C, g.H, g.W}, w[4] = {g.K, g.Cg, g.R, g.S}, y[4] = {g.N, g.K, g.P, g.Q};
  for (int i = 0; i < 4; ++i) shape.x[i] = x[i], shape.w[i] = w[i], shape.y[i] = y[i];
  for (int i = 0; i < 2; ++i)
    shape.stride[i] = g.stride[size_t(i)], shape.padding[i] = g.pad[size_t(i)],
    shape.dilation[i] = g.dil[size_t(i)];
  std::string why_none;
  ConvGraphError error;
  std::shared_ptr<ConvGraphPlan> plan;
  {
    std::lock_guard<std::mutex> lock(d.prepare_mutex());
    plan = ConvGraphPlan::build({make_handle(d.prepare_dnn, d.prepare_dnn_destroy), {}}, dir, shape, d.tf32(),
                                d.conv_options(), why_none, error);
  }
  if (!why_none.empty()) c.unsupported(why_none);
  if (!plan) {
    refused = error.what + ": " + cudnnGetErrorString(error.status);
    return {};
  }
  Chosen chosen;
  chosen.workspace = plan->workspace();
  chosen.name =
      "cudnn graph engine " + std::to_string(plan->engine()) + determinism_note(plan->deterministic());
  chosen.run = [plan](cudnnHandle_t h, void* x, void* w, void* y, void* ws) {
    check_dnn(plan->run(h, x, w, y, ws), "cudnnBackendExecute (convolution)");
  };
  return chosen;
}

Chosen legacy_conv(CudaDevice& d, const ConvShape& g, Dir dir, const Check& c) {
  const std::shared_ptr<Conv> cv = descriptors(g, d.tf32());
  choose_algorithm(d, *cv, dir, c);
  Chosen chosen;
  chosen.workspace = cv->workspace;
  chosen.name = "cudnn algo " + std::to_string(cv->algo) + determinism_note(cv->deterministic);
  chosen.run = [cv, dir](cudnnHandle_t h, void* x, void* w, void* y, void* ws) {
    const float one = 1.0f, zero = 0.0f;
    if (dir == Dir::Forward)
      check_dnn(cudnnConvolutionForward(h, &one, cv->x, x, cv->w, w, cv->conv,
                                        static_cast<cudnnConvolutionFwdAlgo_t>(cv->algo), ws, cv->workspace,
                                        &zero, cv->y, y),
                "cudnnConvolutionForward");
    else if (dir == Dir::GradInput)
      check_dnn(cudnnConvolutionBackwardData(h, &one, cv->w, w, cv->y, y, cv->conv,
                                             static_cast<cudnnConvolutionBwdDataAlgo_t>(cv->algo), ws,
                                             cv->workspace, &zero, cv->x, x),
                "cudnnConvolutionBackwardData");
    else
      check_dnn(cudnnConvolutionBackwardFilter(h, &one, cv->x, x, cv->y, y, cv->conv,
                                               static_cast<cudnnConvolutionBwdFilterAlgo_t>(cv->algo), ws,
                                               cv->workspace, &zero, cv->w, w),
                "cudnnConvolutionBackwardFilter");
  };
  return chosen;
}

std::unique_ptr<Kernel> prepare_conv(CudaDevice& d, const OpView& v, size_t& workspace, Dir dir) {
  Check c(v);
  const ConvShape g = conv_shape(c, dir);
  // An empty batch runs nothing; the legacy descriptors take it as they always did.
  std::string refused;
  Chosen chosen =
      d.conv_api() == math::ConvApi::graph && g.N > 0 ? graph_conv(d, g, dir, c, refused) : Chosen{};
  if (!chosen.run) {
    chosen = legacy_conv(d, g, dir, c);
    if (!refused.empty()) chosen.name += " (cuDNN refused the graph: " + refused + ")";
  }
  // cuDNN's workspace, then (grad_weight with a bias) the dbias reduction's
  // scratch at the next 256-byte boundary.
  const math::ChannelSumPlan bias_plan = math::channel_sum_plan(g.N, g.K, g.P * g.Q);
  const size_t bias_offset = (chosen.workspace + 255) / 256 * 256;
  workspace = dir == Dir::GradWeight && g.bias ? bias_offset + bias_plan.workspace_bytes() : chosen.workspace;
  d.on_new_stream([](CudaStream& s) { dnn_handle(s); });
  const tdm_dtype t = g.t;
  const int64_t N = g.N, K = g.K, inner = g.P * g.Q;
  const bool bias = g.bias;
  const auto run = chosen.run;
  return make_kernel(
      std::string(v.op()) + ":" + chosen.name, [=](CudaStream& s, void* const* in, void* const* o, void* ws) {
        if (N == 0) return;
        // in/o by direction: forward (x, w[, b]) -> y; grad_input (dy, w) -> dx;
        // grad_weight (dy, x) -> dw[, db].
        void* x = dir == Dir::GradInput ? o[0] : in[dir == Dir::Forward ? 0 : 1];
        void* w = dir == Dir::GradWeight ? o[0] : in[1];
        void* y = dir == Dir::Forward ? o[0] : in[0];
        run(dnn_handle(s), x, w, y, ws);
        if (dir == Dir::Forward && bias)
          launch_bias_act(t, o[0], in[2], N, K, inner, math::Act::None, s.get());
        if (dir == Dir::GradWeight && bias)
          launch_channel_sum(t, in[0], t, o[1], bias_plan, static_cast<char*>(ws) + bias_offset, s.get());
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

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("conv2d", conv_fwd);
  r.add("conv2d_grad_input", conv_dx);
  r.add("conv2d_grad_weight", conv_dw);
});

}  // namespace

}  // namespace tandem::cuda
