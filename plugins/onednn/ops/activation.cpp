// oneDNN backend — relu, leaky_relu, gelu (erf/tanh), tanh, sigmoid, silu
// and their gradients: dnnl eltwise primitives over the flat tensor
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

#include "attention_tiles.hpp"
#include "eltwise_primitive.hpp"
#include "layout.hpp"

namespace tandem::onednn {

namespace {

using dnnl::algorithm;
using dnnl::memory;

algorithm forward_algorithm(const Check& c) {
  const std::string op = c.op().op();
  if (op == "relu" || op == "relu_grad" || op == "leaky_relu" || op == "leaky_relu_grad")
    return algorithm::eltwise_relu;
  if (op == "tanh") return algorithm::eltwise_tanh;
  if (op == "tanh_grad") return algorithm::eltwise_tanh_use_dst_for_bwd;
  if (op == "sigmoid") return algorithm::eltwise_logistic;
  if (op == "sigmoid_grad") return algorithm::eltwise_logistic_use_dst_for_bwd;
  if (op == "silu" || op == "silu_grad") return algorithm::eltwise_swish;
  const std::string approx = c.string_attr("approximate", "none");
  if (approx == "none") return algorithm::eltwise_gelu_erf;
  if (approx == "tanh") return algorithm::eltwise_gelu_tanh;
  c.fail("approximate must be none/tanh, got '" + approx + "'");
}

// dnnl's alpha: leaky_relu's negative slope, swish's 1 (silu), 0 for every
// other op here.
float alpha_of(const Check& c) {
  const std::string op = c.op().op();
  if (op == "silu" || op == "silu_grad") return 1.f;
  if (op != "leaky_relu" && op != "leaky_relu_grad") return 0.f;
  const double slope = c.float_attr("negative_slope", 0.01);
  if (!std::isfinite(slope)) c.fail("attribute 'negative_slope' must be finite");
  return static_cast<float>(slope);
}

// gelu_tanh(x) = 0.5·x·(1 + tanh(u)) = x·σ(2u), u = √(2/π)·(x + 0.044715·x³),
// and σ(2u) = e/(e + 1) with e = exp(2u) from the vectorised exp (which
// saturates instead of overflowing). Chunks of kChunk elements: e lives on
// the stack. In-place safe: x[i] is read before y[i] is written.
constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
constexpr int64_t kChunk = 1024;

// Runs step(c0, len, e) over chunks of x, e[i] = exp(2u(x[c0 + i])).
template <class Step>
void over_chunks_with_exp2u(const float* x, int64_t n, Step step) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t len = std::min(kChunk, n - c0);
    const float* xc = x + c0;
    float e[kChunk];
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) e[i] = 2.f * kSqrt2OverPi * (xc[i] + kCubic * xc[i] * xc[i] * xc[i]);
    tiles::exp_inplace(e, len);
    step(c0, len, e);
  }
}

void gelu_tanh_forward(const float* x, float* y, int64_t n) {
  over_chunks_with_exp2u(x, n, [x, y](int64_t c0, int64_t len, const float* e) {
    const float* xc = x + c0;
    float* yc = y + c0;
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) yc[i] = xc[i] * (e[i] / (e[i] + 1.f));
  });
}

// d/dx x·σ(2u) = σ(2u) + 2x·σ(2u)(1 − σ(2u))·u', σ(1 − σ) = e/(e + 1)²,
// u' = √(2/π)·(1 + 3·0.044715·x²).
void gelu_tanh_backward(const float* dy, const float* x, float* dx, int64_t n) {
  over_chunks_with_exp2u(x, n, [dy, x, dx](int64_t c0, int64_t len, const float* e) {
    const float *xc = x + c0, *dyc = dy + c0;
    float* dxc = dx + c0;
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) {
      const float v = xc[i], p = e[i] + 1.f, sp = e[i] / (p * p);
      // Where σ has saturated (sp = 0), x·u' may be inf: the term is 0.
      const float bend = sp == 0.f ? 0.f : 2.f * v * sp * kSqrt2OverPi * (1.f + 3.f * kCubic * v * v);
      dxc[i] = dyc[i] * (e[i] / p + bend);
    }
  });
}

// Whether gelu(_grad) of `op` runs as own code: tanh approximation, f32,
// every tensor plain.
bool own_gelu_tanh(const Check& c) {
  const OpView& op = c.op();
  if (op.op() != "gelu" && op.op() != "gelu_grad") return false;
  if (c.string_attr("approximate", "none") != "tanh" || c.in(0).dtype != TDM_F32) return false;
  for (size_t i = 0; i < op.inputs().size(); ++i)
    if (op.input_native(i)) return false;
  return !op.output_native(0);
}

std::unique_ptr<Kernel> activation(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(1, 1, 1, 1);
  if (own_gelu_tanh(c)) {
    c.output(0, TDM_F32, c.in(0).dims);
    const int64_t n = numel(c.in(0).dims);
    return make_fn(c, [n](void* const* in, void* const* out, void*) {
      gelu_tanh_forward(static_cast<const float*>(in[0]), static_cast<float*>(out[0]), n);
    });
  }
  return eltwise_forward(c, forward_algorithm(c), alpha_of(c), 0.f, ws);
}

std::unique_ptr<Kernel> activation_grad(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 2, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  c.input(1, dt, c.in(0).dims);
  c.output(0, dt, c.in(0).dims);
  if (numel(c.in(0).dims) == 0) return no_op(c);
  if (own_gelu_tanh(c)) {
    const int64_t n = numel(c.in(0).dims);
    return make_fn(c, [n](void* const* in, void* const* out, void*) {
      gelu_tanh_backward(static_cast<const float*>(in[0]), static_cast<const float*>(in[1]),
                         static_cast<float*>(out[0]), n);
    });
  }
  const algorithm algo = forward_algorithm(c);
  const float alpha = alpha_of(c);
  const bool use_dst =
      algo == algorithm::eltwise_tanh_use_dst_for_bwd || algo == algorithm::eltwise_logistic_use_dst_for_bwd;
  auto k = std::make_unique<PrimKernel>(c.op().op());
  const memory::desc md = flat_md(c.in(0));
  const dnnl::eltwise_forward::primitive_desc hint(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, algo, md, alpha, 0.f), engine());
  const dnnl::eltwise_backward::primitive_desc pd(dnnl::eltwise_backward::desc(algo, md, md, alpha, 0.f),
                                                  user_scratchpad_attr(), engine(), hint);
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
  for (const char* op : {"relu", "leaky_relu", "gelu", "tanh", "sigmoid", "silu"})
    r.add(op, {activation, activation_layouts});
  for (const char* op :
       {"relu_grad", "leaky_relu_grad", "gelu_grad", "tanh_grad", "sigmoid_grad", "silu_grad"})
    r.add(op, {activation_grad, activation_layouts});
});

}  // namespace

}  // namespace tandem::onednn
