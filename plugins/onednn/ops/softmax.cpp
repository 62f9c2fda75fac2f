// oneDNN backend — softmax, log_softmax and their gradients: dnnl softmax /
// logsoftmax primitives on an [outer, axis, inner] view.
#include "common.hpp"
#include "dnnl_api.hpp"

namespace tandem::onednn {

namespace {

using dnnl::memory;

// [outer, len, inner] view and the axis (always 1); c.axis refuses rank 0.
memory::desc softmax_md(const Check& c, const TensorShape& t) {
  const size_t axis = c.axis(c.int_attr("axis", -1), t.rank(), "axis");
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= t.dims[i];
  for (size_t i = axis + 1; i < t.rank(); ++i) inner *= t.dims[i];
  return memory::desc({outer, t.dims[axis], inner}, dnnl_type(t.dtype), memory::format_tag::abc);
}

template <bool kLog>
std::unique_ptr<Kernel> softmax(const OpView& op, size_t& ws) {
  Check c(op);
  c.primary_dtype(0, kF32);
  const memory::desc md = softmax_md(c, c.in(0));
  if (numel(c.in(0).dims) == 0) return no_op(c);
  auto k = std::make_unique<PrimKernel>(c.op().op());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, k->bind(md, in_slot(0))},
                                       {DNNL_ARG_DST, k->bind(md, out_slot(0))}};
  add_softmax_forward(*k, kLog, md, 1, std::move(args));
  ws = k->workspace_bytes();
  return k;
}

template <bool kLog>
std::unique_ptr<Kernel> softmax_grad(const OpView& op, size_t& ws) {
  Check c(op);
  c.primary_dtype(0, kF32);
  const memory::desc md = softmax_md(c, c.in(0));
  if (numel(c.in(0).dims) == 0) return no_op(c);
  auto k = std::make_unique<PrimKernel>(c.op().op());
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, k->bind(md, in_slot(0))},
                                       {DNNL_ARG_DST, k->bind(md, in_slot(1))},
                                       {DNNL_ARG_DIFF_SRC, k->bind(md, out_slot(0))}};
  add_softmax_backward(*k, kLog, md, 1, std::move(args));
  ws = k->workspace_bytes();
  return k;
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("softmax", softmax<false>);
  r.add("log_softmax", softmax<true>);
  r.add("softmax_grad", softmax_grad<false>);
  r.add("log_softmax_grad", softmax_grad<true>);
});

}  // namespace

}  // namespace tandem::onednn
