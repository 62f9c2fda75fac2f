// CUDA backend — activations and their gradients, dropout, and the bias +
// activation epilogue used after cuBLAS/cuDNN. The per-element math lives in
// math/activation.hpp and math/dropout.hpp (tested on the CPU).
#include "math/activation.hpp"
#include "math/dropout.hpp"
#include "ops/kernels.cuh"
#include "ops/launchers.hpp"

namespace tandem::cuda {
namespace {

using math::Act;

template <class T>
__global__ void unary_kernel(const T* x, T* y, int64_t n, Act act) {
  TDM_GRID_STRIDE(i, n) st(y, i, math::activate(act, ld(x, i)));
}

template <class T>
__global__ void unary_grad_kernel(const T* dy, const T* v, T* dx, int64_t n, Act act) {
  TDM_GRID_STRIDE(i, n) st(dx, i, math::activate_grad(act, ld(dy, i), ld(v, i)));
}

Act act_of(const OpView& v, const std::string& base) {
  if (base == "relu") return Act::Relu;
  if (base == "tanh") return Act::Tanh;
  if (base == "sigmoid") return Act::Sigmoid;
  const std::string approx = v.string_attr("approximate", "none");
  if (approx == "none") return Act::Gelu;
  if (approx == "tanh") return Act::GeluTanh;
  throw Error(TDM_INVALID_ARGUMENT, "cuda plugin: gelu: approximate must be none or tanh, got " + approx);
}

std::unique_ptr<Kernel> prepare_unary(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(1, 1, 1, 1);
  const tdm_dtype t = c.dtype(0, kFloat);
  c.out_is(0, t, c.in(0).dims);
  const Act act = act_of(v, v.op());
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(v.op(), [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      unary_kernel<T><<<grid_for(n), kThreads, 0, s.get()>>>(static_cast<const T*>(in[0]),
                                                             static_cast<T*>(o[0]), n, act);
    });
  });
  return k;
}

std::unique_ptr<Kernel> prepare_unary_grad(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(2, 2, 1, 1);
  const tdm_dtype t = c.dtype(0, kFloat);
  c.in_is(1, t, c.in(0).dims);
  c.out_is(0, t, c.in(0).dims);
  const std::string name = v.op();
  const Act act = act_of(v, name.substr(0, name.size() - 5));  // strip "_grad"
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(name, [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      unary_grad_kernel<T><<<grid_for(n), kThreads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<const T*>(in[1]), static_cast<T*>(o[0]), n, act);
    });
  });
  return k;
}

// ---- dropout ---------------------------------------------------------------

template <class T>
__global__ void dropout_kernel(const T* x, T* y, uint8_t* mask, int64_t n, uint64_t base_seed,
                               const int64_t* seed_offset, uint32_t threshold, float den) {
  // The per-step offset is read on the device: a new mask per step, no host sync.
  const uint64_t seed = base_seed + (seed_offset ? static_cast<uint64_t>(*seed_offset) : 0);
  TDM_GRID_STRIDE(i, n) {
    const bool keep = math::dropout_keep(seed, static_cast<uint64_t>(i), threshold);
    st(y, i, math::dropout_apply(ld(x, i), keep, den));
    mask[i] = keep ? 1 : 0;
  }
}

template <class T>
__global__ void dropout_grad_kernel(const T* dy, const uint8_t* mask, T* dx, int64_t n, float den) {
  TDM_GRID_STRIDE(i, n) st(dx, i, math::dropout_apply(ld(dy, i), mask[i] != 0, den));
}

double probability(const Check& c) {
  const double p = c.op().float_attr("p", 0.5);
  if (!(p >= 0.0 && p <= 1.0)) c.fail("p must be in [0, 1], got " + std::to_string(p));
  return p;
}

std::unique_ptr<Kernel> prepare_dropout(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(1, 2, 2, 2);
  const tdm_dtype t = c.dtype(0, kFloat);
  c.out_is(0, t, c.in(0).dims);
  c.out_is(1, TDM_U8, c.in(0).dims);
  const bool has_offset = c.has_input(1);
  if (has_offset && (c.in(1).dtype != TDM_S64 || !c.in(1).dims.empty()))
    c.fail("seed_offset must be an s64 scalar");
  const double p = probability(c);
  const uint64_t seed = static_cast<uint64_t>(v.int_attr("seed", 0));
  const uint32_t threshold = math::dropout_threshold(p);
  const float den = static_cast<float>(1.0 - p);
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel("dropout", [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      dropout_kernel<T><<<grid_for(n), kThreads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<T*>(o[0]), static_cast<uint8_t*>(o[1]), n, seed,
          has_offset ? static_cast<const int64_t*>(in[1]) : nullptr, threshold, den);
    });
  });
  return k;
}

std::unique_ptr<Kernel> prepare_dropout_grad(CudaDevice&, const OpView& v, size_t&) {
  Check c(v);
  c.counts(2, 2, 1, 1);
  const tdm_dtype t = c.dtype(0, kFloat);
  c.in_is(1, TDM_U8, c.in(0).dims);
  c.out_is(0, t, c.in(0).dims);
  const float den = static_cast<float>(1.0 - probability(c));
  const int64_t n = numel(c.in(0).dims);
  std::unique_ptr<Kernel> k;
  dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel("dropout_grad", [=](CudaStream& s, void* const* in, void* const* o, void*) {
      if (n == 0) return;
      dropout_grad_kernel<T><<<grid_for(n), kThreads, 0, s.get()>>>(
          static_cast<const T*>(in[0]), static_cast<const uint8_t*>(in[1]), static_cast<T*>(o[0]), n, den);
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

// One block per channel; threads stride over its outer·inner elements.
template <class T>
__global__ void channel_sum_kernel(const T* dy, T* dbias, int64_t outer, int64_t channels, int64_t inner) {
  __shared__ float scratch[32];
  const int64_t c = blockIdx.x;
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < outer * inner; j += blockDim.x) {
    const int64_t o = j / inner, i = j % inner;
    acc += ld(dy, (o * channels + c) * inner + i);
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) st(dbias, c, acc);
}

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

void launch_channel_sum(tdm_dtype dtype, const void* dy, void* dbias, int64_t outer, int64_t channels,
                        int64_t inner, cudaStream_t stream) {
  if (channels == 0) return;
  dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    channel_sum_kernel<T><<<static_cast<unsigned>(channels), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<T*>(dbias), outer, channels, inner);
  });
}

void register_activation(const Registrar& add) {
  for (const char* name : {"relu", "gelu", "tanh", "sigmoid"}) add(name, prepare_unary);
  for (const char* name : {"relu_grad", "gelu_grad", "tanh_grad", "sigmoid_grad"})
    add(name, prepare_unary_grad);
  add("dropout", prepare_dropout);
  add("dropout_grad", prepare_dropout_grad);
}

}  // namespace tandem::cuda
