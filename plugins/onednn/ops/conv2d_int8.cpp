// oneDNN backend — conv2d_int8 (sdk/ops.md): dnnl::convolution_forward with
// u8 src, s8 weights, s32 accumulation and f32 dst, created once here.
//
// As for linear_int8 (linear_int8.cpp), every constant is an attribute: output
// scales f32(x_scale·w_scale[k]) per output channel, the src zero point,
// the bias as a binary-add post-op after the scale (oneDNN 2.x would add its
// own bias argument before it), relu as a post-op. Layouts as in conv2d.cpp:
// every tensor `any`, so oneDNN picks its int8 layouts (nhwc activations,
// VNNI-blocked weights with the zero-point compensation it computes in the
// weights reorder) and its jit kernel for the CPU; the NCHW/OIHW ABI tensors
// are reordered into and out of the workspace by primitives created here
// (layout.hpp's staging helpers). On a CPU without VNNI a second, doubled
// variant keeps the sums exact (int8_pairs.hpp).
#include "cpu_isa.hpp"
#include "dnnl_api.hpp"
#include "int8_pairs.hpp"
#include "layout.hpp"
#include "quant_params.hpp"

namespace tandem::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// conv2d_int8 after validation: what both variants (int8_pairs.hpp) share.
struct ConvInt8 {
  int64_t n = 0, ch = 0, h = 0, wd = 0, k = 0, r = 0, s = 0, p = 0, q = 0, groups = 1;
  Dims st, pd, dl;
  bool bias = false, relu = false;
  int64_t zx = 0;
  std::vector<float> m;  // f32(x_scale·w_scale[k]): one entry, or one per output channel
};

// The primitive for C' = C (direct) or 2C input channels (doubled: x' and w'
// come from add_doubling, each group's channels twice / as [h | g]).
std::unique_ptr<PrimKernel> conv2d_int8_kernel(const ConvInt8& c, bool doubled) {
  dnnl::primitive_attr attr = user_scratchpad_attr();
  // The output channel is the weights' dimension 0 (oihw), or 0 and 1 (goihw).
  const Int8Constants constants(c.m, int32_t(c.zx), c.groups == 1 ? 1 << 0 : 1 << 0 | 1 << 1);
  constants.set(attr);
  dnnl::post_ops post;
  const memory::desc mbias({1, c.k, 1, 1}, memory::data_type::f32, tag::nchw);
  if (c.bias) post.append_binary(dnnl::algorithm::binary_add, mbias);
  if (c.relu) append_eltwise(post, dnnl::algorithm::eltwise_relu);
  attr.set_post_ops(post);

  const int64_t ch = doubled ? 2 * c.ch : c.ch, g = c.groups;
  const memory::desc user_x({c.n, ch, c.h, c.wd}, memory::data_type::u8, tag::nchw);
  const memory::desc user_w =
      g == 1 ? memory::desc({c.k, ch, c.r, c.s}, memory::data_type::s8, tag::oihw)
             : memory::desc({g, c.k / g, ch / g, c.r, c.s}, memory::data_type::s8, tag::goihw);
  const memory::desc user_y({c.n, c.k, c.p, c.q}, memory::data_type::f32, tag::nchw);
  const memory::desc any_x(dims_of(user_x), memory::data_type::u8, tag::any);
  const memory::desc any_w(dims_of(user_w), memory::data_type::s8, tag::any);
  const memory::desc any_y(dims_of(user_y), memory::data_type::f32, tag::any);
  const auto cpd = convolution_forward_pd(dnnl::prop_kind::forward_inference,
                                          {any_x,
                                           any_w,
                                           any_y,
                                           nullptr,
                                           {c.st[0], c.st[1]},
                                           {c.dl[0] - 1, c.dl[1] - 1},
                                           {c.pd[0], c.pd[1]},
                                           {c.pd[0], c.pd[1]}},
                                          attr);

  auto kernel = std::make_unique<PrimKernel>(doubled ? "conv2d_int8:doubled" : "conv2d_int8");
  DoubledOperands operands{in_slot(0), in_slot(1)};
  if (doubled) operands = add_doubling(*kernel, c.n * g, c.ch / g * c.h * c.wd, c.k, c.ch / g * c.r * c.s);
  const memory mx = staged_in(*kernel, user_x, cpd.src_desc(), operands.x);
  const memory mw = staged_in(*kernel, user_w, cpd.weights_desc(), operands.w);
  const StagedOut y = staged_out(*kernel, user_y, cpd.dst_desc(), out_slot(0));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, y.chosen}};
  if (c.bias) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = kernel->bind(mbias, in_slot(2));
  constants.add_args(args);
  kernel->add<dnnl::convolution_forward>(cpd, std::move(args));
  staged_out_finish(*kernel, y);
  return kernel;
}

// The registry has checked the geometry (conv2d's rule), the dtypes, y, the
// bias, the attributes' ranges, the scales (1 or K of w_scale, positive and
// finite in f32) and that C/groups·R·S <= 65536 keeps the s32 sums exact.
ConvInt8 conv2d_int8_params(const Check& c) {
  const Dims& x = c.in(0).dims;
  const Dims& w = c.in(1).dims;
  const Dims& y = c.out(0).dims;
  ConvInt8 p;
  p.st = c.pair_attr("stride", {1, 1}), p.pd = c.pair_attr("padding", {0, 0});
  p.dl = c.pair_attr("dilation", {1, 1});
  p.groups = c.int_attr("groups");
  p.n = x[0], p.ch = x[1], p.h = x[2], p.wd = x[3], p.k = w[0], p.r = w[2], p.s = w[3];
  p.p = y[2], p.q = y[3];
  p.bias = c.has_input(2);
  const float sx = float(c.float_attr("x_scale", -1));  // required, > 0
  p.zx = c.int_attr("x_zero_point");
  p.m = float_list(c, "w_scale");
  for (float& v : p.m) v = sx * v;  // f32(x_scale·w_scale[k]), one rounding, as the catalog says
  p.relu = c.string_attr("activation") == "relu";
  return p;
}

std::unique_ptr<Kernel> conv2d_int8(const OpView& op, size_t& ws) {
  Check c(op);
  c.primary_dtype(0, {TDM_U8});
  const ConvInt8 p = conv2d_int8_params(c);
  std::unique_ptr<PrimKernel> direct = conv2d_int8_kernel(p, false);
  if (!cpu_int8_pairs_saturate()) {
    ws = direct->workspace_bytes();
    return direct;
  }
  auto kernel = std::make_unique<PairSafeInt8Kernel>(std::move(direct), conv2d_int8_kernel(p, true),
                                                     p.k * (p.ch / p.groups) * p.r * p.s);
  ws = kernel->workspace_bytes();
  return kernel;
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("conv2d_int8", conv2d_int8); });

}  // namespace

}  // namespace tandem::onednn
