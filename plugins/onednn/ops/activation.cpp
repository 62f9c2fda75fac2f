// oneDNN backend — activations, their gradients, scale, softmax and
// log_softmax: dnnl eltwise / softmax / logsoftmax primitives.
//
// Elementwise ops see the tensor as one flat dense vector. That holds for the
// native layout too (layout.hpp: no padding), so activations accept and offer
// it; the op computes in its output's layout and reorders an input that the
// host handed in the other one (only at a chain's edge). Gradients that the
// catalog defines on the forward output (tanh_grad, sigmoid_grad) use the
// *_use_dst_for_bwd algorithms; relu_grad and gelu_grad read x. Softmax views
// the tensor as [outer, axis, inner].
#include "layout.hpp"

namespace tandem::onednn {

namespace {

using dnnl::algorithm;
using dnnl::memory;

memory::desc flat_md(const TensorShape& t) {
  return memory::desc({numel(t.dims)}, dnnl_type(t.dtype), memory::format_tag::a);
}

std::unique_ptr<Kernel> noop(const Check& c) {
  return make_fn(c, [](void* const*, void* const*, void*) {});
}

algorithm forward_algorithm(const Check& c) {
  const std::string op = c.op().op();
  if (op == "relu" || op == "relu_grad") return algorithm::eltwise_relu;
  if (op == "tanh") return algorithm::eltwise_tanh;
  if (op == "tanh_grad") return algorithm::eltwise_tanh_use_dst_for_bwd;
  if (op == "sigmoid") return algorithm::eltwise_logistic;
  if (op == "sigmoid_grad") return algorithm::eltwise_logistic_use_dst_for_bwd;
  const std::string approx = c.string_attr("approximate", "none");
  if (approx == "none") return algorithm::eltwise_gelu_erf;
  if (approx == "tanh") return algorithm::eltwise_gelu_tanh;
  c.fail("approximate must be none/tanh, got '" + approx + "'");
}

std::unique_ptr<Kernel> eltwise_forward(const Check& c, algorithm algo, float alpha, float beta, size_t& ws) {
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  c.output(0, dt, c.in(0).dims);
  if (numel(c.in(0).dims) == 0) return noop(c);
  auto k = std::make_unique<PrimKernel>(c.op().op());
  const memory::desc md = flat_md(c.in(0));
  const dnnl::eltwise_forward::primitive_desc pd(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, algo, md, alpha, beta),
      user_scratchpad_attr(), engine());
  const Slot x = input_in_layout(*k, c, 0, c.op().output_native(0));
  k->add<dnnl::eltwise_forward>(pd,
                                {{DNNL_ARG_SRC, k->bind(md, x)}, {DNNL_ARG_DST, k->bind(md, out_slot(0))}});
  ws = k->workspace_bytes();
  return k;
}

std::unique_ptr<Kernel> activation(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(1, 1, 1, 1);
  return eltwise_forward(c, forward_algorithm(c), 0.f, 0.f, ws);
}

std::unique_ptr<Kernel> scale(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(1, 1, 1, 1);
  const float alpha = float(c.float_attr("alpha", 1.0)), beta = float(c.float_attr("beta", 0.0));
  return eltwise_forward(c, algorithm::eltwise_linear, alpha, beta, ws);
}

std::unique_ptr<Kernel> activation_grad(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 2, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32Bf16);
  c.input(1, dt, c.in(0).dims);
  c.output(0, dt, c.in(0).dims);
  if (numel(c.in(0).dims) == 0) return noop(c);
  const algorithm algo = forward_algorithm(c);
  const bool use_dst =
      algo == algorithm::eltwise_tanh_use_dst_for_bwd || algo == algorithm::eltwise_logistic_use_dst_for_bwd;
  auto k = std::make_unique<PrimKernel>(c.op().op());
  const memory::desc md = flat_md(c.in(0));
  const dnnl::eltwise_forward::primitive_desc hint(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, algo, md, 0.f, 0.f), engine());
  const dnnl::eltwise_backward::primitive_desc pd(dnnl::eltwise_backward::desc(algo, md, md, 0.f, 0.f),
                                                  user_scratchpad_attr(), engine(), hint);
  const Slot dy = input_in_layout(*k, c, 0, c.op().output_native(0));
  const Slot x_or_y = input_in_layout(*k, c, 1, c.op().output_native(0));
  k->add<dnnl::eltwise_backward>(pd, {{DNNL_ARG_DIFF_DST, k->bind(md, dy)},
                                      {use_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, k->bind(md, x_or_y)},
                                      {DNNL_ARG_DIFF_SRC, k->bind(md, out_slot(0))}});
  ws = k->workspace_bytes();
  return k;
}

// [outer, len, inner] view and the axis (always 1).
memory::desc softmax_md(const Check& c, const TensorShape& t) {
  if (t.rank() == 0) c.fail("softmax needs rank >= 1");
  const size_t axis = c.axis(c.int_attr("axis", -1), t.rank(), "axis");
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= t.dims[i];
  for (size_t i = axis + 1; i < t.rank(); ++i) inner *= t.dims[i];
  return memory::desc({outer, t.dims[axis], inner}, dnnl_type(t.dtype), memory::format_tag::abc);
}

std::unique_ptr<Kernel> softmax(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(1, 1, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  c.output(0, dt, c.in(0).dims);
  const memory::desc md = softmax_md(c, c.in(0));
  if (numel(c.in(0).dims) == 0) return noop(c);
  auto k = std::make_unique<PrimKernel>(c.op().op());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, k->bind(md, in_slot(0))},
                                       {DNNL_ARG_DST, k->bind(md, out_slot(0))}};
  const auto kind = dnnl::prop_kind::forward_inference;
  if (c.op().op() == "softmax")
    k->add<dnnl::softmax_forward>(
        dnnl::softmax_forward::primitive_desc(dnnl::softmax_forward::desc(kind, md, 1),
                                              user_scratchpad_attr(), engine()),
        std::move(args));
  else
    k->add<dnnl::logsoftmax_forward>(
        dnnl::logsoftmax_forward::primitive_desc(dnnl::logsoftmax_forward::desc(kind, md, 1),
                                                 user_scratchpad_attr(), engine()),
        std::move(args));
  ws = k->workspace_bytes();
  return k;
}

std::unique_ptr<Kernel> softmax_grad(const OpView& op, size_t& ws) {
  Check c(op);
  c.counts(2, 2, 1, 1);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  c.input(1, dt, c.in(0).dims);
  c.output(0, dt, c.in(0).dims);
  const memory::desc md = softmax_md(c, c.in(0));
  if (numel(c.in(0).dims) == 0) return noop(c);
  auto k = std::make_unique<PrimKernel>(c.op().op());
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, k->bind(md, in_slot(0))},
                                       {DNNL_ARG_DST, k->bind(md, in_slot(1))},
                                       {DNNL_ARG_DIFF_SRC, k->bind(md, out_slot(0))}};
  const auto kind = dnnl::prop_kind::forward_training;
  if (c.op().op() == "softmax_grad") {
    const dnnl::softmax_forward::primitive_desc hint(dnnl::softmax_forward::desc(kind, md, 1), engine());
    k->add<dnnl::softmax_backward>(
        dnnl::softmax_backward::primitive_desc(dnnl::softmax_backward::desc(md, md, 1),
                                               user_scratchpad_attr(), engine(), hint),
        std::move(args));
  } else {
    const dnnl::logsoftmax_forward::primitive_desc hint(dnnl::logsoftmax_forward::desc(kind, md, 1),
                                                        engine());
    k->add<dnnl::logsoftmax_backward>(
        dnnl::logsoftmax_backward::primitive_desc(dnnl::logsoftmax_backward::desc(md, md, 1),
                                                  user_scratchpad_attr(), engine(), hint),
        std::move(args));
  }
  ws = k->workspace_bytes();
  return k;
}

void activation_layouts(const OpView& op, const LayoutAnswer& a) {
  for (size_t i = 0; i < op.inputs().size(); ++i) a.accept(op, i);
  a.offer(op, 0);
}

}  // namespace

void register_eltwise_layouts(const LayoutRegistrar& add) {
  for (const char* op :
       {"relu", "gelu", "tanh", "sigmoid", "relu_grad", "gelu_grad", "tanh_grad", "sigmoid_grad"})
    add(op, activation_layouts);
}

void register_eltwise(const Registrar& add) {
  for (const char* op : {"relu", "gelu", "tanh", "sigmoid"}) add(op, activation);
  for (const char* op : {"relu_grad", "gelu_grad", "tanh_grad", "sigmoid_grad"}) add(op, activation_grad);
  add("scale", scale);
  add("softmax", softmax);
  add("log_softmax", softmax);
  add("softmax_grad", softmax_grad);
  add("log_softmax_grad", softmax_grad);
}

}  // namespace tandem::onednn
