// oneDNN backend — conv2d and its gradients: dnnl convolution forward,
// backward data and backward weights (direct algorithm).
//
// Activations stay NCHW (the ABI layout) so no activation is reordered. The
// weights are declared `any` so oneDNN picks its blocked layout; the user's
// OIHW weights are then reordered into the workspace (forward, backward data)
// or the blocked diff_weights reordered back out (backward weights) by reorder
// primitives created here, in prepare.
#include "common.hpp"

namespace tandem::onednn {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct ConvGeometry {
  int64_t n, c, h, w, k, r, s, p, q, groups;
  memory::dims stride, dilate, pad;
  tdm_dtype dt;
};

int64_t conv_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

// Validates attrs and shapes; x is the image [N,C,H,W], w the filter, y the
// output image [N,K,P,Q] (which side each comes from depends on the op).
ConvGeometry geometry(const Check& c, tdm_dtype dt, const Dims& x, const Dims& w, const Dims& y) {
  const Dims st = c.pair_attr("stride", {1, 1}), pd = c.pair_attr("padding", {0, 0});
  const Dims dl = c.pair_attr("dilation", {1, 1});
  const int64_t g = c.int_attr("groups", 1);
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) c.fail("x, w and y must be rank 4 (NCHW)");
  if (st[0] < 1 || st[1] < 1 || dl[0] < 1 || dl[1] < 1 || pd[0] < 0 || pd[1] < 0)
    c.fail("stride and dilation must be >= 1, padding >= 0");
  if (g < 1 || x[1] % g != 0 || w[0] % g != 0)
    c.fail("groups = " + std::to_string(g) + " must divide C and K");
  ConvGeometry geo{x[0],           x[1], x[2], x[3], w[0],           w[2],
                   w[3],           0,    0,    g,    {st[0], st[1]}, {dl[0] - 1, dl[1] - 1},
                   {pd[0], pd[1]}, dt};
  if (w[1] != x[1] / g)
    c.fail("w: expected " + std::to_string(x[1] / g) + " input channels, got " + dims_str(w));
  geo.p = conv_out(geo.h, geo.r, st[0], pd[0], dl[0]);
  geo.q = conv_out(geo.w, geo.s, st[1], pd[1], dl[1]);
  if (geo.p < 1 || geo.q < 1) c.fail("the output would be empty (P or Q < 1)");
  const Dims want{geo.n, geo.k, geo.p, geo.q};
  if (y != want) c.fail("output image: expected " + dims_str(want) + ", got " + dims_str(y));
  return geo;
}

memory::desc image_md(int64_t n, int64_t ch, int64_t h, int64_t w, tdm_dtype dt) {
  return memory::desc({n, ch, h, w}, dnnl_type(dt), tag::nchw);
}
memory::desc user_weights_md(const ConvGeometry& g) {
  if (g.groups == 1) return memory::desc({g.k, g.c, g.r, g.s}, dnnl_type(g.dt), tag::oihw);
  return memory::desc({g.groups, g.k / g.groups, g.c / g.groups, g.r, g.s}, dnnl_type(g.dt), tag::goihw);
}
memory::desc any_weights_md(const ConvGeometry& g) {
  const memory::desc u = user_weights_md(g);
  return memory::desc(u.dims(), dnnl_type(g.dt), tag::any);
}
memory::desc src_md(const ConvGeometry& g) {
  return image_md(g.n, g.c, g.h, g.w, g.dt);
}
memory::desc dst_md(const ConvGeometry& g) {
  return image_md(g.n, g.k, g.p, g.q, g.dt);
}

dnnl::convolution_forward::primitive_desc forward_pd(const ConvGeometry& g, bool bias) {
  const memory::desc b({g.k}, dnnl_type(g.dt), tag::x);
  const auto d = bias ? dnnl::convolution_forward::desc(
                            dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_md(g),
                            any_weights_md(g), b, dst_md(g), g.stride, g.dilate, g.pad, g.pad)
                      : dnnl::convolution_forward::desc(
                            dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_md(g),
                            any_weights_md(g), dst_md(g), g.stride, g.dilate, g.pad, g.pad);
  return dnnl::convolution_forward::primitive_desc(d, user_scratchpad_attr(), engine());
}

// The weights memory a conv reads: the user's tensor itself when oneDNN
// chose the plain layout, else a workspace copy filled by a reorder step.
memory weights_in(PrimKernel& k, const ConvGeometry& g, const memory::desc& chosen, size_t input) {
  const memory::desc user = user_weights_md(g);
  if (chosen == user) return k.bind(user, in_slot(input));
  memory staged = k.bind(chosen, {Slot::workspace, k.reserve(chosen.get_size())});
  const memory src = k.bind(user, in_slot(input));
  const dnnl::reorder::primitive_desc rpd(engine(), user, engine(), chosen, user_scratchpad_attr());
  k.add<dnnl::reorder>(rpd, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, staged}});
  return staged;
}

std::unique_ptr<Kernel> conv2d(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 3, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  c.input_dtype(1, {dt});
  if (!c.has_output(0) || c.out(0).dtype != dt) c.fail("output 0 must be " + std::string(dtype_name(dt)));
  const ConvGeometry g = geometry(c, dt, c.in(0).dims, c.in(1).dims, c.out(0).dims);
  const bool bias = c.has_input(2);
  if (bias) c.input(2, dt, {g.k});
  auto k = std::make_unique<PrimKernel>("conv2d");
  const auto pd = forward_pd(g, bias);
  const memory w = weights_in(*k, g, pd.weights_desc(), 1);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, k->bind(src_md(g), in_slot(0))},
                                       {DNNL_ARG_WEIGHTS, w},
                                       {DNNL_ARG_DST, k->bind(dst_md(g), out_slot(0))}};
  if (bias) args[DNNL_ARG_BIAS] = k->bind(pd.bias_desc(), in_slot(2));
  k->add<dnnl::convolution_forward>(pd, std::move(args));
  ws = k->workspace_bytes();
  return k;
}

std::unique_ptr<Kernel> conv2d_grad_input(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 2, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  c.input_dtype(1, {dt});
  if (!c.has_output(0) || c.out(0).dtype != dt) c.fail("output 0 must be " + std::string(dtype_name(dt)));
  const ConvGeometry g = geometry(c, dt, c.out(0).dims, c.in(1).dims, c.in(0).dims);
  auto k = std::make_unique<PrimKernel>("conv2d_grad_input");
  const auto hint = forward_pd(g, false);
  const dnnl::convolution_backward_data::primitive_desc pd(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src_md(g), any_weights_md(g),
                                            dst_md(g), g.stride, g.dilate, g.pad, g.pad),
      user_scratchpad_attr(), engine(), hint);
  const memory w = weights_in(*k, g, pd.weights_desc(), 1);
  k->add<dnnl::convolution_backward_data>(pd, {{DNNL_ARG_DIFF_DST, k->bind(dst_md(g), in_slot(0))},
                                               {DNNL_ARG_WEIGHTS, w},
                                               {DNNL_ARG_DIFF_SRC, k->bind(src_md(g), out_slot(0))}});
  ws = k->workspace_bytes();
  return k;
}

std::unique_ptr<Kernel> conv2d_grad_weight(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 2, 1, 2);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  c.input_dtype(1, {dt});
  if (!c.has_output(0) || c.out(0).dtype != dt) c.fail("output 0 must be " + std::string(dtype_name(dt)));
  const ConvGeometry g = geometry(c, dt, c.in(1).dims, c.out(0).dims, c.in(0).dims);
  const bool has_bias = c.int_attr("has_bias", 1) != 0;
  if (has_bias != c.has_output(1))
    c.fail(std::string("has_bias = ") + (has_bias ? "1 requires" : "0 forbids") + " the dbias output");
  if (has_bias) c.output(1, dt, {g.k});
  auto k = std::make_unique<PrimKernel>("conv2d_grad_weight");
  const auto hint = forward_pd(g, has_bias);
  const memory::desc b({g.k}, dnnl_type(dt), tag::x);
  const auto d = has_bias ? dnnl::convolution_backward_weights::desc(
                                dnnl::algorithm::convolution_direct, src_md(g), any_weights_md(g), b,
                                dst_md(g), g.stride, g.dilate, g.pad, g.pad)
                          : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct,
                                                                     src_md(g), any_weights_md(g), dst_md(g),
                                                                     g.stride, g.dilate, g.pad, g.pad);
  const dnnl::convolution_backward_weights::primitive_desc pd(d, user_scratchpad_attr(), engine(), hint);
  const memory::desc user = user_weights_md(g), chosen = pd.diff_weights_desc();
  const memory out_w = k->bind(user, out_slot(0));
  const memory dw =
      chosen == user ? out_w : k->bind(chosen, {Slot::workspace, k->reserve(chosen.get_size())});
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, k->bind(src_md(g), in_slot(1))},
                                       {DNNL_ARG_DIFF_DST, k->bind(dst_md(g), in_slot(0))},
                                       {DNNL_ARG_DIFF_WEIGHTS, dw}};
  if (has_bias) args[DNNL_ARG_DIFF_BIAS] = k->bind(pd.diff_bias_desc(), out_slot(1));
  k->add<dnnl::convolution_backward_weights>(pd, std::move(args));
  if (!(chosen == user)) {
    const dnnl::reorder::primitive_desc rpd(engine(), chosen, engine(), user, user_scratchpad_attr());
    k->add<dnnl::reorder>(rpd, {{DNNL_ARG_FROM, dw}, {DNNL_ARG_TO, out_w}});
  }
  ws = k->workspace_bytes();
  return k;
}

}  // namespace

void register_conv(const Registrar& add) {
  add("conv2d", conv2d);
  add("conv2d_grad_input", conv2d_grad_input);
  add("conv2d_grad_weight", conv2d_grad_weight);
}

}  // namespace tandem::onednn
