// oneDNN backend — conv2d and its gradients: dnnl convolution forward,
// backward data and backward weights (direct algorithm).
//
// Every tensor of a primitive is declared `any`, so oneDNN picks its blocked
// layouts (nChw16c activations, blocked weights) and with them its direct
// jit:avx512 convolutions; with plain NCHW activations it could only offer
// gemm:jit (im2col + sgemm), which was 2-20x slower here and pathological for
// the C = 1 first layer's backward weights. A tensor crossing the ABI is
// NCHW/OIHW, or nChw16c where the host chose the native layout (ABI 1.3,
// layout.hpp: activations inside a conv/relu/pool chain): an input in
// another layout than the one oneDNN chose is reordered into the workspace
// before the primitive, such an output is written to the workspace and
// reordered out after it. All reorders are primitives created here, in
// prepare; a tensor already in the chosen layout is bound directly, with no
// copy, which inside a native chain is every activation.
// One exception: the weight gradient of a one-channel convolution on CPUs
// whose oneDNN kernels are AVX2 or narrower is own code
// (conv_single_channel.hpp), where oneDNN's direct kernel is slow.
#include "conv_single_channel.hpp"
#include "cpu_isa.hpp"
#include "dnnl_api.hpp"
#include "layout.hpp"

#include <omp.h>

namespace tandem::onednn {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct ConvGeometry {
  int64_t n, c, h, w, k, r, s, p, q, groups;
  memory::dims stride, dilate, pad;
  tdm_dtype dt;
};

// The sizes and attributes of a convolution; x is the image [N,C,H,W], w the
// filter, y the output image [N,K,P,Q] (which side each comes from depends
// on the op). The registry has checked them against conv2d's shape rule.
ConvGeometry geometry(const Check& c, tdm_dtype dt, const Dims& x, const Dims& w, const Dims& y) {
  const Dims st = c.pair_attr("stride", {1, 1}), pd = c.pair_attr("padding", {0, 0});
  const Dims dl = c.pair_attr("dilation", {1, 1});
  const int64_t g = c.int_attr("groups");
  return ConvGeometry{x[0],           x[1], x[2], x[3], w[0],           w[2],
                      w[3],           y[2], y[3], g,    {st[0], st[1]}, {dl[0] - 1, dl[1] - 1},
                      {pd[0], pd[1]}, dt};
}

memory::desc image_md(int64_t n, int64_t ch, int64_t h, int64_t w, tdm_dtype dt) {
  return memory::desc({n, ch, h, w}, dnnl_type(dt), tag::nchw);
}
memory::desc user_weights_md(const ConvGeometry& g) {
  if (g.groups == 1) return memory::desc({g.k, g.c, g.r, g.s}, dnnl_type(g.dt), tag::oihw);
  return memory::desc({g.groups, g.k / g.groups, g.c / g.groups, g.r, g.s}, dnnl_type(g.dt), tag::goihw);
}
memory::desc any_md(const memory::desc& user) {
  return memory::desc(dims_of(user), data_type_of(user), tag::any);
}
memory::desc any_weights_md(const ConvGeometry& g) {
  return any_md(user_weights_md(g));
}
memory::desc src_md(const ConvGeometry& g) {
  return image_md(g.n, g.c, g.h, g.w, g.dt);
}
memory::desc dst_md(const ConvGeometry& g) {
  return image_md(g.n, g.k, g.p, g.q, g.dt);
}

// The layer's descriptors, every layout left to oneDNN; `bias` (plain) may be null.
ConvDescs descs(const ConvGeometry& g, const memory::desc* bias) {
  return {any_md(src_md(g)), any_weights_md(g), any_md(dst_md(g)), bias, g.stride, g.dilate, g.pad, g.pad};
}

dnnl::convolution_forward::primitive_desc forward_pd(const ConvGeometry& g, bool bias) {
  const memory::desc b({g.k}, dnnl_type(g.dt), tag::x);
  return convolution_forward_pd(dnnl::prop_kind::forward_training, descs(g, bias ? &b : nullptr),
                                user_scratchpad_attr());
}

std::unique_ptr<Kernel> conv2d(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const ConvGeometry g = geometry(c, dt, c.in(0).dims, c.in(1).dims, c.out(0).dims);
  const bool bias = c.has_input(2);
  auto k = std::make_unique<PrimKernel>("conv2d");
  const auto pd = forward_pd(g, bias);
  const memory x = staged_in(*k, layout_md(c.in(0), op.input_native(0)), pd.src_desc(), in_slot(0));
  const memory w = staged_in(*k, user_weights_md(g), pd.weights_desc(), in_slot(1));
  const StagedOut y = staged_out(*k, layout_md(c.out(0), op.output_native(0)), pd.dst_desc(), out_slot(0));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y.chosen}};
  if (bias) args[DNNL_ARG_BIAS] = k->bind(pd.bias_desc(), in_slot(2));
  k->add<dnnl::convolution_forward>(pd, std::move(args));
  staged_out_finish(*k, y);
  ws = k->workspace_bytes();
  return k;
}

std::unique_ptr<Kernel> conv2d_grad_input(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const ConvGeometry g = geometry(c, dt, c.out(0).dims, c.in(1).dims, c.in(0).dims);
  auto k = std::make_unique<PrimKernel>("conv2d_grad_input");
  const auto hint = forward_pd(g, false);
  const auto pd = convolution_backward_data_pd(descs(g, nullptr), hint, user_scratchpad_attr());
  const memory dy = staged_in(*k, layout_md(c.in(0), op.input_native(0)), pd.diff_dst_desc(), in_slot(0));
  const memory w = staged_in(*k, user_weights_md(g), pd.weights_desc(), in_slot(1));
  const StagedOut dx =
      staged_out(*k, layout_md(c.out(0), op.output_native(0)), pd.diff_src_desc(), out_slot(0));
  k->add<dnnl::convolution_backward_data>(
      pd, {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, dx.chosen}});
  staged_out_finish(*k, dx);
  ws = k->workspace_bytes();
  return k;
}

// Whether conv2d_grad_weight runs as own code (conv_single_channel.hpp): f32,
// one input channel, one group, plain x, where oneDNN's kernels are
// AVX2 or narrower (its AVX-512 kernel for this layer was not measured).
bool single_channel_own(const OpView& op) {
  if (op.inputs().size() != 2) return false;
  const TensorShape& x = op.inputs()[1];
  return x.dtype == TDM_F32 && x.dims.size() == 4 && x.dims[1] == 1 && op.int_attr("groups", 1) == 1 &&
         cpu_vector_level() != VectorLevel::avx512;
}

std::unique_ptr<Kernel> single_channel_kernel(const Check& c, const ConvGeometry& g, bool has_bias,
                                              size_t& ws) {
  SingleChannelConv s;
  s.n = g.n, s.h = g.h, s.w = g.w, s.k = g.k, s.r = g.r, s.s = g.s, s.p = g.p, s.q = g.q;
  s.stride_h = g.stride[0], s.stride_w = g.stride[1], s.pad_h = g.pad[0], s.pad_w = g.pad[1];
  s.dilation_h = g.dilate[0] + 1, s.dilation_w = g.dilate[1] + 1;  // oneDNN counts dilation from 0
  s.dy_block = c.op().input_native(0) ? native_block() : 0;
  s.bias = has_bias;
  // The team size the backend fixed (from the host's `threads`), as the own GEMM takes it.
  const int threads = omp_get_max_threads();
  ws = single_channel_weight_grad_workspace(s, threads);
  return make_fn(c, [s, threads](void* const* in, void* const* out, void* w) {
    single_channel_weight_grad(s, static_cast<const float*>(in[0]), static_cast<const float*>(in[1]),
                               static_cast<float*>(out[0]), s.bias ? static_cast<float*>(out[1]) : nullptr, w,
                               threads);
  });
}

std::unique_ptr<Kernel> conv2d_grad_weight(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const ConvGeometry g = geometry(c, dt, c.in(1).dims, c.out(0).dims, c.in(0).dims);
  const bool has_bias = c.int_attr("has_bias") != 0;  // the dbias output is there exactly then
  if (single_channel_own(op) && !op.input_native(1)) return single_channel_kernel(c, g, has_bias, ws);
  auto k = std::make_unique<PrimKernel>("conv2d_grad_weight");
  const auto hint = forward_pd(g, has_bias);
  const memory::desc b({g.k}, dnnl_type(dt), tag::x);
  const auto pd =
      convolution_backward_weights_pd(descs(g, has_bias ? &b : nullptr), hint, user_scratchpad_attr());
  const memory x = staged_in(*k, layout_md(c.in(1), op.input_native(1)), pd.src_desc(), in_slot(1));
  const memory dy = staged_in(*k, layout_md(c.in(0), op.input_native(0)), pd.diff_dst_desc(), in_slot(0));
  const StagedOut dw = staged_out(*k, user_weights_md(g), pd.diff_weights_desc(), out_slot(0));
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_WEIGHTS, dw.chosen}};
  if (has_bias) args[DNNL_ARG_DIFF_BIAS] = k->bind(pd.diff_bias_desc(), out_slot(1));
  k->add<dnnl::convolution_backward_weights>(pd, std::move(args));
  staged_out_finish(*k, dw);
  ws = k->workspace_bytes();
  return k;
}

// Activations may be native (layout.hpp); weights, bias and their gradients
// are parameters and gradients, always plain.
void conv2d_layouts(const OpView& op, const LayoutAnswer& a) {
  a.accept(op, 0);  // x
  a.offer(op, 0);   // y
}
void conv2d_grad_input_layouts(const OpView& op, const LayoutAnswer& a) {
  a.accept(op, 0);  // dy
  a.offer(op, 0);   // dx
}
void conv2d_grad_weight_layouts(const OpView& op, const LayoutAnswer& a) {
  a.accept(op, 0);                     // dy
  if (single_channel_own(op)) return;  // x plain (one channel is never native anyway)
  a.accept(op, 1);                     // x
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("conv2d", {conv2d, conv2d_layouts});
  r.add("conv2d_grad_input", {conv2d_grad_input, conv2d_grad_input_layouts});
  r.add("conv2d_grad_weight", {conv2d_grad_weight, conv2d_grad_weight_layouts});
});

}  // namespace

}  // namespace tandem::onednn
