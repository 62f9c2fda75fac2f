// oneDNN backend — relu, leaky_relu, gelu (erf/tanh), tanh, sigmoid, silu,
// softplus and their gradients: dnnl eltwise primitives over the flat tensor
// (eltwise_primitive.hpp), in either layout (native or plain). leaky_relu is
// dnnl's relu with alpha = negative_slope (its backward also takes the slope
// at x == 0, as the catalog does); silu is dnnl's swish x·sigmoid(alpha·x)
// with alpha = 1. Gradients that the catalog defines on the
// forward output (tanh_grad, sigmoid_grad) use the *_use_dst_for_bwd
// algorithms; relu_grad, leaky_relu_grad and gelu_grad read x. gelu with
// approximate = "tanh" on plain f32 tensors (a transformer's MLP) is own
// code instead: oneDNN 2.6's AVX2 gelu_tanh kernels took 55 ms of a 600 ms GPT
// step on 1 thread under ONEDNN_MAX_CPU_ISA=AVX2 (gelu + gelu_grad, 4 x 3.1 M
// elements each); this takes 18 ms (`tandem bench bench/models/gpt.toml --profile`).
#include <algorithm>
#include <cmath>

#include "dnnl_api.hpp"
#include "eltwise_primitive.hpp"
#include "layout.hpp"
#include "vector_loops.hpp"

namespace tandem::onednn {

namespace {

using dnnl::algorithm;
using dnnl::memory;

// The catalog's activations in dnnl terms: the registry maps each op name
// to its factory instantiated for one of these, so no factory compares names.
enum class Act { relu, leaky_relu, gelu, tanh, sigmoid, silu, softplus };

// The dnnl algorithm of `act` (of its gradient when `backward`): tanh and
// sigmoid differentiate from the forward output (*_use_dst_for_bwd).
algorithm algorithm_of(Act act, const Check& c, bool backward) {
  switch (act) {
    case Act::relu:
    case Act::leaky_relu:
      return algorithm::eltwise_relu;
    case Act::tanh:
      return backward ? algorithm::eltwise_tanh_use_dst_for_bwd : algorithm::eltwise_tanh;
    case Act::sigmoid:
      return backward ? algorithm::eltwise_logistic_use_dst_for_bwd : algorithm::eltwise_logistic;
    case Act::silu:
      return algorithm::eltwise_swish;
    case Act::softplus:  // own code (softplus() below)
      c.unsupported("softplus has no dnnl algorithm here");
    case Act::gelu:
      break;
  }
  return c.string_attr("approximate") == "tanh" ? algorithm::eltwise_gelu_tanh : algorithm::eltwise_gelu_erf;
}

// dnnl's alpha: leaky_relu's negative slope, swish's 1 (silu), 0 for every
// other op here.
float alpha_of(Act act, const Check& c) {
  if (act == Act::silu) return 1.f;
  return act == Act::leaky_relu ? static_cast<float>(c.float_attr("negative_slope")) : 0.f;
}

// Own code (gelu's tanh form, softplus) runs over a flat tensor in chunks
// of this many elements among the threads.
constexpr int64_t kOwnChunk = 4096;

// Whether gelu(_grad) runs as own code: tanh approximation, f32, every
// tensor plain.
bool own_gelu_tanh(Act act, const Check& c) {
  const OpView& op = c.op();
  if (act != Act::gelu || c.string_attr("approximate") != "tanh" || c.in(0).dtype != TDM_F32) return false;
  for (size_t i = 0; i < op.inputs().size(); ++i)
    if (op.input_native(i)) return false;
  return !op.output_native(0);
}

// softplus and its gradient: oneDNN's soft_relu has no threshold, so own
// code over the flat tensor (plain layouts), f32 arithmetic for bf16 too.
struct Softplus {
  float beta, threshold;
  float operator()(float x) const {
    const float z = beta * x;
    return z > threshold ? x : (std::max(z, 0.f) + std::log1p(std::exp(-std::abs(z)))) / beta;
  }
  float grad(float dy, float x) const {
    const float z = beta * x;
    return z > threshold ? dy : dy / (1.f + std::exp(-z));
  }
};

std::unique_ptr<Kernel> softplus(const Check& c, bool backward) {
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const Dims dims = c.in(0).dims;
  const Softplus f{static_cast<float>(c.float_attr("beta")), static_cast<float>(c.float_attr("threshold"))};
  const int64_t n = numel(dims);
  return with_f32_bf16(dt, [&](auto tag) {
    using T = decltype(tag);
    return make_fn(c, [=](void* const* in, void* const* out, void*) {
      const T* a = static_cast<const T*>(in[0]);
      const T* x = backward ? static_cast<const T*>(in[1]) : nullptr;
      T* y = static_cast<T*>(out[0]);
      over_chunks(n, kOwnChunk, [=](int64_t c0, int64_t len) {
        for (int64_t i = c0; i < c0 + len; ++i) st(y, i, backward ? f.grad(ld(a, i), ld(x, i)) : f(ld(a, i)));
      });
    });
  });
}

template <Act A>
std::unique_ptr<Kernel> activation(const OpView& op, size_t& ws) {
  Check c(op);
  if constexpr (A == Act::softplus) return softplus(c, false);
  if (own_gelu_tanh(A, c)) {
    const int64_t n = numel(c.in(0).dims);
    return make_fn(c, [n](void* const* in, void* const* out, void*) {
      const float* x = static_cast<const float*>(in[0]);
      float* y = static_cast<float*>(out[0]);
      over_chunks(n, kOwnChunk, [=](int64_t c0, int64_t len) { loops::gelu_tanh(x + c0, y + c0, len); });
    });
  }
  return eltwise_forward(c, algorithm_of(A, c, false), alpha_of(A, c), 0.f, ws);
}

template <Act A>
std::unique_ptr<Kernel> activation_grad(const OpView& op, size_t& ws) {
  Check c(op);
  if constexpr (A == Act::softplus) return softplus(c, true);
  c.primary_dtype(0, kF32Bf16);
  if (numel(c.in(0).dims) == 0) return no_op(c);
  if (own_gelu_tanh(A, c)) {
    const int64_t n = numel(c.in(0).dims);
    return make_fn(c, [n](void* const* in, void* const* out, void*) {
      const float *dy = static_cast<const float*>(in[0]), *x = static_cast<const float*>(in[1]);
      float* dx = static_cast<float*>(out[0]);
      over_chunks(n, kOwnChunk,
                  [=](int64_t c0, int64_t len) { loops::gelu_tanh_grad(dy + c0, x + c0, dx + c0, len); });
    });
  }
  const algorithm algo = algorithm_of(A, c, true);
  const float alpha = alpha_of(A, c);
  const bool use_dst =
      algo == algorithm::eltwise_tanh_use_dst_for_bwd || algo == algorithm::eltwise_logistic_use_dst_for_bwd;
  auto k = std::make_unique<PrimKernel>(c.op().op());
  const memory::desc md = flat_md(c.in(0));
  const auto hint =
      eltwise_forward_pd(dnnl::prop_kind::forward_training, algo, md, alpha, 0.f, dnnl::primitive_attr());
  const auto pd = eltwise_backward_pd(algo, md, alpha, 0.f, hint, user_scratchpad_attr());
  const Slot dy = input_in_layout(*k, c, 0, c.op().output_native(0));
  const Slot x_or_y = input_in_layout(*k, c, 1, c.op().output_native(0));
  k->add<dnnl::eltwise_backward>(pd, {{DNNL_ARG_DIFF_DST, k->bind(md, dy)},
                                      {use_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, k->bind(md, x_or_y)},
                                      {DNNL_ARG_DIFF_SRC, k->bind(md, out_slot(0))}});
  ws = k->workspace_bytes();
  return k;
}

void activation_layouts(const OpView& op, const LayoutAnswer& a) {
  for (size_t i = 0; i < op.inputs().size(); ++i) a.accept(op, i);
  a.offer(op, 0);
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("relu", {activation<Act::relu>, activation_layouts});
  r.add("leaky_relu", {activation<Act::leaky_relu>, activation_layouts});
  r.add("gelu", {activation<Act::gelu>, activation_layouts});
  r.add("tanh", {activation<Act::tanh>, activation_layouts});
  r.add("sigmoid", {activation<Act::sigmoid>, activation_layouts});
  r.add("silu", {activation<Act::silu>, activation_layouts});
  r.add("softplus", activation<Act::softplus>);
  r.add("relu_grad", {activation_grad<Act::relu>, activation_layouts});
  r.add("leaky_relu_grad", {activation_grad<Act::leaky_relu>, activation_layouts});
  r.add("gelu_grad", {activation_grad<Act::gelu>, activation_layouts});
  r.add("tanh_grad", {activation_grad<Act::tanh>, activation_layouts});
  r.add("sigmoid_grad", {activation_grad<Act::sigmoid>, activation_layouts});
  r.add("silu_grad", {activation_grad<Act::silu>, activation_layouts});
  r.add("softplus_grad", activation_grad<Act::softplus>);
});

}  // namespace

}  // namespace tandem::onednn
