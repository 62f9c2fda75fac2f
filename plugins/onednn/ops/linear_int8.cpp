// oneDNN backend — linear_int8 (sdk/ops.md) on dnnl::matmul u8×s8 -> s32
// -> f32.
//
// Every constant of the op (x's scale and zero point, the weights' scales) is
// an attribute, so the whole primitive — output scales f32(sx·sw[n]) per
// column, the src zero point, bias as a binary post-op, relu — is created
// once here and a launch only binds pointers; on a CPU without VNNI a second,
// doubled variant keeps it exact (int8_pairs.hpp). The bias is a post-op and
// not matmul's bias argument because oneDNN 2.x adds the bias to the s32
// accumulator *before* the output scale (dst = oscale·(acc + bias)), while
// the catalog adds an f32 bias after it (oneDNN 3 reads the scales at each
// execution, dnnl_api.hpp; the post-op serves both). oneDNN picks its VNNI (or AMX)
// brgemm kernel for u8×s8 on its own where the CPU has one; kernel_describe
// shows which.
#include "cpu_isa.hpp"
#include "dnnl_api.hpp"
#include "int8_pairs.hpp"
#include "quant_params.hpp"

namespace tandem::onednn {
namespace {

using dnnl::memory;

// linear_int8 after validation: what both variants (int8_pairs.hpp) share.
struct LinearInt8 {
  int64_t b = 0, k = 0, n = 0;
  bool bias = false, relu = false;
  int64_t zx = 0;
  std::vector<float> m;  // f32(sx·sw[n]): one entry, or one per column
};

// The primitive for x[b, k']·w[n, k']ᵀ with k' = k (direct) or 2k (doubled,
// reading x' and w' that add_doubling writes into the workspace).
std::unique_ptr<PrimKernel> linear_int8_kernel(const LinearInt8& p, bool doubled) {
  dnnl::primitive_attr attr = user_scratchpad_attr();
  const Int8Constants constants(p.m, int32_t(p.zx), 1 << 1);  // w[n, k] seen as [k, n]: n is dimension 1
  constants.set(attr);
  dnnl::post_ops post;
  const memory::desc mbias({1, p.n}, memory::data_type::f32, memory::format_tag::ab);
  if (p.bias) post.append_binary(dnnl::algorithm::binary_add, mbias);
  if (p.relu) append_eltwise(post, dnnl::algorithm::eltwise_relu);
  attr.set_post_ops(post);

  const int64_t k = doubled ? 2 * p.k : p.k;
  const memory::desc mx({p.b, k}, memory::data_type::u8, memory::format_tag::ab);
  const memory::desc mw({k, p.n}, memory::data_type::s8, memory::format_tag::ba);  // w[n,k] seen as [k,n]
  const memory::desc my({p.b, p.n}, memory::data_type::f32, memory::format_tag::ab);
  const auto pd = matmul_pd(mx, mw, nullptr, my, attr);
  auto kernel = std::make_unique<PrimKernel>(doubled ? "linear_int8:doubled" : "linear_int8");
  DoubledOperands operands{in_slot(0), in_slot(1)};
  if (doubled) operands = add_doubling(*kernel, p.b, p.k, p.n, p.k);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, kernel->bind(mx, operands.x)},
                                       {DNNL_ARG_WEIGHTS, kernel->bind(mw, operands.w)},
                                       {DNNL_ARG_DST, kernel->bind(my, out_slot(0))}};
  if (p.bias) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = kernel->bind(mbias, in_slot(2));
  constants.add_args(args);
  kernel->add<dnnl::matmul>(pd, std::move(args));
  return kernel;
}

std::unique_ptr<Kernel> linear_int8(const OpView& op, size_t& ws) {
  Check c(op);
  c.primary_dtype(0, {TDM_U8});
  LinearInt8 p;
  p.b = c.in(0).dims[0], p.k = c.in(0).dims[1], p.n = c.in(1).dims[0];
  p.bias = c.has_input(2);
  const float sx = float(c.float_attr("x_scale", -1));  // required, > 0
  p.zx = c.int_attr("x_zero_point");
  // The shape rule has checked w_scale (1 or N entries, positive and finite
  // in f32) and that K <= 65536 keeps the s32 sums exact.
  const std::vector<float> sw = float_list(c, "w_scale");
  p.relu = c.string_attr("activation") == "relu";
  if (p.b * p.n == 0) return no_op(c);
  if (p.k == 0) c.unsupported("an empty reduction dim (K = 0) is not implemented");
  for (float s : sw) p.m.push_back(sx * s);  // f32(sx·sw[n]), one rounding, as the catalog says

  std::unique_ptr<PrimKernel> direct = linear_int8_kernel(p, false);
  if (!cpu_int8_pairs_saturate()) {
    ws = direct->workspace_bytes();
    return direct;
  }
  auto kernel =
      std::make_unique<PairSafeInt8Kernel>(std::move(direct), linear_int8_kernel(p, true), p.n * p.k);
  ws = kernel->workspace_bytes();
  return kernel;
}

[[maybe_unused]] const bool registered =
    sections().enlist([](Registry& r) { r.add("linear_int8", linear_int8); });

}  // namespace

}  // namespace tandem::onednn
