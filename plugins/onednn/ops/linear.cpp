// oneDNN backend — linear and its gradients: the own GEMM where it serves
// (f32 on an AVX2 CPU, sgemm.hpp), else dnnl::matmul or oneDNN's sgemm
// (matmul_primitive.hpp). linear's bias and relu are fused (in the own
// GEMM's last k block, or as dnnl's bias argument and eltwise post-op);
// dbias is summed while the own GEMM packs dy, else an own column sum over
// the batch dim (column_sum.hpp).
#include "column_sum.hpp"
#include "dnnl_api.hpp"
#include "matmul_primitive.hpp"

namespace tandem::onednn {

namespace {

using dnnl::memory;

std::unique_ptr<Kernel> linear(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const int64_t n = c.in(0).dims[0], i = c.in(0).dims[1], o = c.in(1).dims[0];
  const tdm_dtype yt = c.product_output_dtype(0, dt);  // f32 from bf16 operands too, bias likewise
  const bool bias = c.has_input(2);
  const std::string act = c.string_attr("activation");
  dnnl::post_ops post;
  if (act == "relu")
    append_eltwise(post, dnnl::algorithm::eltwise_relu);
  else if (act == "tanh")
    append_eltwise(post, dnnl::algorithm::eltwise_tanh);
  else if (act == "sigmoid")
    append_eltwise(post, dnnl::algorithm::eltwise_logistic);
  if (n * o == 0) return no_op(c);
  if (i == 0) c.unsupported("an empty reduction dim (I = 0) is not implemented");
  const sgemm::Problem own{n, o, i, false, true, bias, act == "relu"};
  if (dt == TDM_F32 && (act == "none" || act == "relu") && sgemm::serves(own))
    return sgemm_kernel(c, own, 0, 1, 2, ws);
  const memory::desc mx = view_md({}, n, i, false, dt), mw = view_md({}, i, o, true, dt);
  const memory::desc my = view_md({}, n, o, false, yt), mbias = view_md({}, 1, o, false, yt);
  return matmul_kernel("linear", mx, in_slot(0), mw, in_slot(1), my, out_slot(0), bias ? &mbias : nullptr,
                       in_slot(2), post, ws);
}

std::unique_ptr<Kernel> linear_grad_input(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const int64_t n = c.in(0).dims[0], o = c.in(0).dims[1], i = c.in(1).dims[1];
  // dx = dy·w + addend: the addend is summed into dx where it lies (in
  // place, when the host's plan lets dx take its bytes) by the GEMM itself.
  const bool addend = c.has_input(2);
  if (n * i == 0 || o == 0) c.unsupported("empty dims are not implemented");
  const sgemm::Problem own{.m = n, .n = i, .k = o, .accumulate = addend};
  if (dt == TDM_F32 && sgemm::serves(own)) return sgemm_kernel(c, own, 0, 1, 0, ws, 2);
  const Slot addend_slot = in_slot(2);
  return matmul_kernel("linear_grad_input", view_md({}, n, o, false, dt), in_slot(0),
                       view_md({}, o, i, false, dt), in_slot(1), view_md({}, n, i, false, dt), out_slot(0),
                       nullptr, {}, {}, ws, addend ? &addend_slot : nullptr);
}

std::unique_ptr<Kernel> linear_grad_weight(const OpView& op, size_t& ws) {
  Check c(op);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  const int64_t n = c.in(0).dims[0], o = c.in(0).dims[1], i = c.in(1).dims[1];
  const tdm_dtype wt = c.product_output_dtype(0, dt);  // f32 from bf16 operands too
  const bool has_bias = c.int_attr("has_bias") != 0;   // the dbias output is there exactly then
  if (n == 0 || o * i == 0) c.unsupported("empty dims are not implemented");
  // dw = dyᵀ·x, dy stored [n, o]; dbias = dy's column sums, taken while packing dy.
  const sgemm::Problem own{o, i, n, true, false, false, false, has_bias};
  if (dt == TDM_F32 && sgemm::serves(own)) return sgemm_kernel(c, own, 0, 1, 0, ws);
  auto k = std::make_unique<PrimKernel>("linear_grad_weight");
  const memory::desc mdy_t = view_md({}, o, n, true, dt), mx = view_md({}, n, i, false, dt);
  const memory::desc mdw = view_md({}, o, i, false, wt);
  add_product(*k, mdy_t, in_slot(0), mx, in_slot(1), mdw, out_slot(0), nullptr, {}, user_scratchpad_attr(),
              false);
  if (has_bias) {
    // Own column sum, not dnnl::reduction: oneDNN 2.6 has only its reference
    // (ref:any) implementation for this [N, O] -> [1, O] sum, which cost more
    // than the matmul beside it on the MLPs. Rows are added in order (f32
    // accumulators), so the result is deterministic for any thread count.
    with_f32_bf16(dt, [&](auto tag_value) {
      using T = decltype(tag_value);
      if (wt == TDM_F32)
        k->hook(
            [n, o](void* const* in, void* const* out, char*) { column_sum<T, float>(in[0], out[1], n, o); });
      else
        k->hook([n, o](void* const* in, void* const* out, char*) { column_sum<T>(in[0], out[1], n, o); });
    });
  }
  ws = k->workspace_bytes();
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("linear", linear);
  r.add("linear_grad_input", linear_grad_input);
  r.add("linear_grad_weight", linear_grad_weight);
});

}  // namespace

}  // namespace tandem::onednn
