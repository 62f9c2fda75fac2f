// CUDA backend — activations and their gradients, and the bias + activation
// epilogue used after cuBLAS/cuDNN (ops/launchers.hpp). The per-element math
// lives in math/activation.hpp (tested on the CPU).
#include <cmath>

#include "math/activation.hpp"
#include "ops/column_sum.cuh"
#include "ops/launchers.hpp"

namespace tandem::cuda {
namespace {

using math::Act;

template <class T>
__global__ void unary_kernel(const T* x, T* y, int64_t n, Act act, float slope) {
  TDM_GRID_STRIDE(i, n) st(y, i, math::activate(act, ld(x, i), slope));
}

template <class T>
__global__ void unary_grad_kernel(const T* dy, const T* v, T* dx, int64_t n, Act act, float slope) {
  TDM_GRID_STRIDE(i, n) st(dx, i, math::activate_grad(act, ld(dy, i), ld(v, i), slope));
}

Act act_of(const OpView& v, const std::string& base) {
  if (base == "relu") return Act::Relu;
  if (base == "leaky_relu") return Act::LeakyRelu;
  if (base == "tanh") return Act::Tanh;
  if (base == "sigmoid") return Act::Sigmoid;
  if (base == "silu") return Act::Silu;
  const std::string approx = v.string_attr("approximate", "none");
  if (approx == "none") return Act::Gelu;
  if (approx == "tanh") return Act::GeluTanh;
  throw Error(TDM_INVALID_ARGUMENT, "cuda plugin: gelu: approximate must be none or tanh, got " + approx);
}

// leaky_relu's negative_slope; 0 for the other activations.
float slope_of(const Check& c, Act act) {
  if (act != Act::LeakyRelu) return 0.0f;
  const double slope = c.float_attr("negative_slope", 0.01);
  if (!std::isfinite(slope)) c.fail("attribute 'negative_slope' must be finite");
  return static_cast<float>(slope);
}

std::unique_ptr<Kernel> prepare_unary(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(1, 1, 1, 1);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  c.output(0, t, c.in(0).dims);
  const Act act = act_of(v, v.op());
  const float slope = slope_of(c, act);
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      unary_kernel<T><<<grid_for(n), kThreads, 0, s.get()>>>(static_cast<const T*>(in[0]),
                                                             static_cast<T*>(o[0]), n, act, slope);
    });
  });
  return k;
}

std::unique_ptr<Kernel> prepare_unary_grad(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(2, 2, 1, 1);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  c.input(1, t, c.in(0).dims);
  c.output(0, t, c.in(0).dims);
  const std::string name = v.op();
  const Act act = act_of(v, name.substr(0, name.size() - 5));  // strip "_grad"
  const float slope = slope_of(c, act);
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(name, [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      unary_grad_kernel<T><<<grid_for(n), kThreads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<T*>(o[0]), n, act, slope);
    });
  });
  return k;
}

// ---- epilogue and bias gradient --------------------------------------------

template <class T>
__global__ void bias_act_kernel(T* y, const T* bias, int64_t n, int64_t channels, int64_t inner, Act act) {
  TDM_GRID_STRIDE(i, n) {
    float v = ld(y, i);
    if (bias != nullptr) v += ld(bias, (i / inner) % channels);
    st(y, i, math::activate(act, v));
  }
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  for (const char* name : {"relu", "leaky_relu", "gelu", "tanh", "sigmoid", "silu"})
    r.add(name, prepare_unary);
  for (const char* name :
       {"relu_grad", "leaky_relu_grad", "gelu_grad", "tanh_grad", "sigmoid_grad", "silu_grad"})
    r.add(name, prepare_unary_grad);
});

}  // namespace

void launch_bias_act(tdm_dtype dtype, void* y, const void* bias, int64_t outer, int64_t channels,
                     int64_t inner, math::Act act, cudaStream_t stream) {
  const int64_t n = outer * channels * inner;
  if (n == 0 || (bias == nullptr && act == Act::None)) return;
  dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    bias_act_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(y), static_cast<const T*>(bias),
                                                             n, channels, inner, act);
  });
}

void launch_channel_sum(tdm_dtype dtype, const void* dy, tdm_dtype dbias_dtype, void* dbias,
                        const math::ChannelSumPlan& plan, void* scratch, cudaStream_t stream) {
  dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (dbias_dtype == TDM_F32)
      launch_channel_sums(plan, static_cast<const T*>(dy), static_cast<float*>(dbias), scratch, stream);
    else
      launch_channel_sums(plan, static_cast<const T*>(dy), static_cast<T*>(dbias), scratch, stream);
  });
}

}  // namespace tandem::cuda
