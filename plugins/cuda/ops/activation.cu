// CUDA backend — activations and their gradients, and the bias + activation
// epilogue used after cuBLAS/cuDNN (ops/launchers.hpp). The per-element math
// lives in math/activation.hpp (tested on the CPU).
#include <cmath>
#include <iterator>
#include <utility>

#include "math/activation.hpp"
#include "ops/column_sum.cuh"
#include "ops/launchers.hpp"

namespace tandem::cuda {
namespace {

using math::Act;

// An activation's parameters: the float attributes of its catalog entry,
// in order (leaky_relu's negative_slope), the registry having checked them.
struct Params {
  float p0 = 0, p1 = 0;
};

Params params_of(const Check& c) {
  float p[2] = {0, 0};
  size_t n = 0;
  for (const catalog::Attribute& a : catalog::find(c.op().op())->attrs)
    if (a.type == TDM_ATTR_FLOAT && n < 2) p[n++] = static_cast<float>(c.float_attr(a.name.c_str()));
  return {p[0], p[1]};
}

// gelu's approximation is an attribute, not an op of its own.
Act with_attributes(const Check& c, Act act) {
  return act == Act::Gelu && c.string_attr("approximate") == "tanh" ? Act::GeluTanh : act;
}

template <class T>
__global__ void unary_kernel(const T* x, T* y, int64_t n, Act act, Params p) {
  TDM_GRID_STRIDE(i, n) st(y, i, math::activate(act, ld(x, i), p.p0, p.p1));
}

template <class T>
__global__ void unary_grad_kernel(const T* dy, const T* v, T* dx, int64_t n, Act act, Params p) {
  TDM_GRID_STRIDE(i, n) st(dx, i, math::activate_grad(act, ld(dy, i), ld(v, i), p.p0, p.p1));
}

// The factories of math::kActivations[I] and its gradient: the registry's
// lookup of the name is the only dispatch.
template <size_t I>
std::unique_ptr<Kernel> prepare_unary(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  const Act act = with_attributes(c, math::kActivations[I].act);
  const Params p = params_of(c);
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      unary_kernel<T><<<grid_for(n), kThreads, 0, s.get()>>>(static_cast<const T*>(in[0]),
                                                             static_cast<T*>(o[0]), n, act, p);
    });
  });
  return k;
}

template <size_t I>
std::unique_ptr<Kernel> prepare_unary_grad(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  const tdm_dtype t = c.primary_dtype(0, kFloat);
  const Act act = with_attributes(c, math::kActivations[I].act);
  const Params p = params_of(c);
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      unary_grad_kernel<T><<<grid_for(n), kThreads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<T*>(o[0]), n, act, p);
    });
  });
  return k;
}

template <size_t... I>
void register_activations(Registry& r, std::index_sequence<I...>) {
  ((r.add(math::kActivations[I].op, prepare_unary<I>),
    r.add(std::string(math::kActivations[I].op) + "_grad", prepare_unary_grad<I>)),
   ...);
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

[[maybe_unused]] const bool registered = sections().enlist(
    [](Registry& r) { register_activations(r, std::make_index_sequence<std::size(math::kActivations)>()); });

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
