// oneDNN backend — the flat dnnl::eltwise_forward (eltwise_primitive.hpp).
#include "eltwise_primitive.hpp"

#include "dnnl_api.hpp"
#include "layout.hpp"

namespace tandem::onednn {

using dnnl::algorithm;
using dnnl::memory;

memory::desc flat_md(const TensorShape& t) {
  return memory::desc({numel(t.dims)}, dnnl_type(t.dtype), memory::format_tag::a);
}

std::unique_ptr<Kernel> eltwise_forward(const Check& c, algorithm algo, float alpha, float beta, size_t& ws) {
  c.primary_dtype(0, kF32Bf16);
  if (numel(c.in(0).dims) == 0) return no_op(c);
  auto k = std::make_unique<PrimKernel>(c.op().op());
  const memory::desc md = flat_md(c.in(0));
  const auto pd =
      eltwise_forward_pd(dnnl::prop_kind::forward_inference, algo, md, alpha, beta, user_scratchpad_attr());
  const Slot x = input_in_layout(*k, c, 0, c.op().output_native(0));
  k->add<dnnl::eltwise_forward>(pd,
                                {{DNNL_ARG_SRC, k->bind(md, x)}, {DNNL_ARG_DST, k->bind(md, out_slot(0))}});
  ws = k->workspace_bytes();
  return k;
}

}  // namespace tandem::onednn
