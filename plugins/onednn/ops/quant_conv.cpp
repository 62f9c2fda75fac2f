// oneDNN backend — conv2d_int8 (sdk/ops.md): dnnl::convolution_forward with
// u8 src, s8 weights, s32 accumulation and f32 dst, created once here.
//
// As for linear_int8 (quant.cpp), every constant is an attribute: output
// scales f32(x_scale·w_scale[k]) per output channel, the src zero point,
// the bias as a binary-add post-op after the scale (oneDNN 2.x would add its
// own bias argument before it), relu as a post-op. Layouts as in conv.cpp:
// every tensor `any`, so oneDNN picks its int8 layouts (nhwc activations,
// VNNI-blocked weights with the zero-point compensation it computes in the
// weights reorder) and its jit avx512_core_vnni kernel; the NCHW/OIHW ABI
// tensors are reordered into and out of the workspace by primitives created
// here. (conv.cpp's staging helpers are private to that file, which is being
// reworked for native layouts; the few lines are repeated here.)
#include <cmath>

#include "common.hpp"

namespace tandem::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

memory staged_in(PrimKernel& k, const memory::desc& user, const memory::desc& chosen, Slot slot) {
  if (chosen == user) return k.bind(user, slot);
  memory staged = k.bind(chosen, {Slot::workspace, k.reserve(chosen.get_size())});
  const memory src = k.bind(user, slot);
  const dnnl::reorder::primitive_desc rpd(engine(), user, engine(), chosen, user_scratchpad_attr());
  k.add<dnnl::reorder>(rpd, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, staged}});
  return staged;
}

std::unique_ptr<Kernel> conv2d_int8(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 3, 1, 1);
  c.primary_dtype(0, {TDM_U8});
  c.input_dtype(1, {TDM_S8});
  const Dims& x = c.in(0).dims;
  const Dims& w = c.in(1).dims;
  if (x.size() != 4 || w.size() != 4) c.fail("x and w must be rank 4 (NCHW, OIHW)");
  const Dims st = c.pair_attr("stride", {1, 1}), pd = c.pair_attr("padding", {0, 0});
  const Dims dl = c.pair_attr("dilation", {1, 1});
  const int64_t groups = c.int_attr("groups", 1);
  if (st[0] < 1 || st[1] < 1 || dl[0] < 1 || dl[1] < 1 || pd[0] < 0 || pd[1] < 0)
    c.fail("stride and dilation must be >= 1, padding >= 0");
  const int64_t n = x[0], ch = x[1], h = x[2], wd = x[3], k = w[0], r = w[2], s = w[3];
  if (groups < 1 || ch % groups != 0 || k % groups != 0) c.fail("groups must divide C and K");
  if (w[1] != ch / groups) c.fail("w must have C/groups = " + std::to_string(ch / groups) + " channels");
  const int64_t p = (h + 2 * pd[0] - dl[0] * (r - 1) - 1) / st[0] + 1;
  const int64_t q = (wd + 2 * pd[1] - dl[1] * (s - 1) - 1) / st[1] + 1;
  if (h + 2 * pd[0] - dl[0] * (r - 1) - 1 < 0 || wd + 2 * pd[1] - dl[1] * (s - 1) - 1 < 0)
    c.fail("the filter does not fit the padded image");
  if ((ch / groups) * r * s > 65536) c.fail("C/groups·R·S exceeds 65536, where s32 sums could overflow");
  const bool bias = c.has_input(2);
  if (bias) c.input(2, TDM_F32, {k});
  c.output(0, TDM_F32, {n, k, p, q});
  const float sx = float(c.float_attr("x_scale", -1));
  const int64_t zx = c.int_attr("x_zero_point", 0);
  if (!(sx > 0) || !std::isfinite(sx)) c.fail("x_scale must be given, positive and finite");
  if (zx < 0 || zx > 255) c.fail("x_zero_point " + std::to_string(zx) + " is outside 0..255");
  const tdm_attr* a = c.op().attr("w_scale");
  std::vector<float> m;
  if (a != nullptr && a->type == TDM_ATTR_FLOATS && a->floats != nullptr)
    for (size_t i = 0; i < a->count; ++i) m.push_back(float(a->floats[i]));
  if (a != nullptr && (a->type == TDM_ATTR_FLOAT || a->type == TDM_ATTR_INT))
    m = {a->type == TDM_ATTR_FLOAT ? float(a->f) : float(a->i)};
  if (m.size() != 1 && int64_t(m.size()) != k)
    c.fail("w_scale must be given with 1 or K = " + std::to_string(k) + " entries");
  for (float& v : m) {
    if (!(v > 0) || !std::isfinite(v)) c.fail("every w_scale must be positive and finite");
    v = sx * v;  // f32(x_scale·w_scale[k]), one rounding, as the catalog says
  }
  const std::string act = c.string_attr("activation", "none");
  if (act != "none" && act != "relu") c.fail("activation must be none or relu, got '" + act + "'");

  dnnl::primitive_attr attr = user_scratchpad_attr();
  attr.set_output_scales(m.size() == 1 ? 0 : 1 << 1, m);
  if (zx != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {int32_t(zx)});
  dnnl::post_ops post;
  const memory::desc mbias({1, k, 1, 1}, memory::data_type::f32, tag::nchw);
  if (bias) post.append_binary(dnnl::algorithm::binary_add, mbias);
  if (act == "relu") post.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  attr.set_post_ops(post);

  const memory::desc user_x({n, ch, h, wd}, memory::data_type::u8, tag::nchw);
  const memory::desc user_w =
      groups == 1 ? memory::desc({k, ch, r, s}, memory::data_type::s8, tag::oihw)
                  : memory::desc({groups, k / groups, ch / groups, r, s}, memory::data_type::s8, tag::goihw);
  const memory::desc user_y({n, k, p, q}, memory::data_type::f32, tag::nchw);
  const memory::desc any_x(user_x.dims(), memory::data_type::u8, tag::any);
  const memory::desc any_w(user_w.dims(), memory::data_type::s8, tag::any);
  const memory::desc any_y(user_y.dims(), memory::data_type::f32, tag::any);
  const dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, any_x, any_w, any_y,
      {st[0], st[1]}, {dl[0] - 1, dl[1] - 1}, {pd[0], pd[1]}, {pd[0], pd[1]});
  const dnnl::convolution_forward::primitive_desc cpd(d, attr, engine());

  auto kernel = std::make_unique<PrimKernel>("conv2d_int8");
  const memory mx = staged_in(*kernel, user_x, cpd.src_desc(), in_slot(0));
  const memory mw = staged_in(*kernel, user_w, cpd.weights_desc(), in_slot(1));
  const memory y_user = kernel->bind(user_y, out_slot(0));
  const memory my =
      cpd.dst_desc() == user_y
          ? y_user
          : kernel->bind(cpd.dst_desc(), {Slot::workspace, kernel->reserve(cpd.dst_desc().get_size())});
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, my}};
  if (bias) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = kernel->bind(mbias, in_slot(2));
  kernel->add<dnnl::convolution_forward>(cpd, std::move(args));
  if (my != y_user) {
    const dnnl::reorder::primitive_desc rpd(engine(), cpd.dst_desc(), engine(), user_y,
                                            user_scratchpad_attr());
    kernel->add<dnnl::reorder>(rpd, {{DNNL_ARG_FROM, my}, {DNNL_ARG_TO, y_user}});
  }
  ws = kernel->workspace_bytes();
  return kernel;
}

}  // namespace

void register_quant_conv(const Registrar& add) {
  add("conv2d_int8", conv2d_int8);
}

}  // namespace tandem::onednn
